"""Bytes autograd keeps for backward, measured exactly with saved-tensor hooks (lessons 01, 05)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


def _storage_key(t: torch.Tensor):
    return (t.device, t.untyped_storage().data_ptr())


def saved_tensor_bytes(fn: Callable[[], object], exclude: Iterable[torch.Tensor] = ()) -> int:
    """Run `fn()` (a forward pass) and return the bytes of distinct storages autograd saved for
    backward. Tensors sharing storage count once; storages of `exclude` (e.g. the model's
    parameters, which are saved by reference and cost nothing extra) are skipped. Works on any device.
    """
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {type(fn).__name__}")
    skip = {_storage_key(t) for t in exclude}
    seen: dict[tuple, int] = {}

    def pack(t: torch.Tensor):
        key = _storage_key(t)
        if key not in skip:
            seen[key] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())
