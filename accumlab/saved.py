"""Bytes autograd keeps for backward, measured exactly with saved-tensor hooks (lessons 01, 05)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable

import torch


def _storage_key(t: torch.Tensor):
    return (t.device, t.untyped_storage().data_ptr())


def _excluded(exclude: Iterable[torch.Tensor]) -> set:
    """Storage keys of `exclude`: tensors, e.g. model.parameters() (a generator is fine)."""
    if isinstance(exclude, (str, bytes, torch.Tensor)) or not isinstance(exclude, Iterable):
        raise ValueError(
            "exclude must be an iterable of tensors such as model.parameters(), got "
            f"{type(exclude).__name__}"
        )
    keys = set()
    for t in exclude:
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"exclude must hold tensors only, got a {type(t).__name__}: {t!r:.60}")
        keys.add(_storage_key(t))
    return keys


def saved_storages(fn: Callable[[], object], exclude: Iterable[torch.Tensor] = ()) -> dict:
    """Run `fn()` and return {storage key: bytes} for every distinct storage autograd saved for
    backward, minus the storages of `exclude`. The building block of `saved_tensor_bytes` (lesson 05
    unions it with what gradient checkpointing holds)."""
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {type(fn).__name__}")
    skip = _excluded(exclude)
    seen: dict[tuple, int] = {}

    def pack(t: torch.Tensor):
        key = _storage_key(t)
        if key not in skip:
            seen[key] = t.untyped_storage().nbytes()
        return t.detach()  # see LiveSavedTensors._pack: no reference cycle through a saved output

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return seen


def saved_tensor_bytes(fn: Callable[[], object], exclude: Iterable[torch.Tensor] = ()) -> int:
    """Run `fn()` (a forward pass) and return the bytes of distinct storages autograd saved for
    backward. Tensors sharing storage count once; storages of `exclude` (e.g. the model's
    parameters, which are saved by reference and cost nothing extra) are skipped. Works on any device.
    """
    return sum(saved_storages(fn, exclude).values())


class _Held:
    """What autograd stores instead of a saved tensor while `LiveSavedTensors` is active: when the
    graph releases it (after backward, or when the graph is garbage), its bytes stop counting."""

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor


class LiveSavedTensors:
    """Context manager tracking the bytes of saved-for-backward tensors that are still alive.

    `with LiveSavedTensors(exclude=model.parameters()) as live: ...` then read `live.bytes` (alive
    now) and `live.peak` (the most alive at once). Unlike `saved_tensor_bytes`, it sees backward
    release a graph, so it shows what a loop keeps alive across micro-steps. Lesson 05.
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()):
        self._skip = _excluded(exclude)
        self._refs: dict[tuple, int] = {}  # storage key -> holders alive that point into it
        self._sizes: dict[tuple, int] = {}
        self.bytes = 0
        self.peak = 0
        self._hooks = None

    def _release(self, key) -> None:
        self._refs[key] -= 1
        if self._refs[key] == 0:
            del self._refs[key]
            self.bytes -= self._sizes.pop(key)

    def _pack(self, t: torch.Tensor):
        key = _storage_key(t)
        if key in self._skip:
            return t
        if key not in self._refs:
            self._refs[key] = 0
            self._sizes[key] = t.untyped_storage().nbytes()
            self.bytes += self._sizes[key]
            self.peak = max(self.peak, self.bytes)
        self._refs[key] += 1
        # detached: a saved output holds its own grad_fn, and through it this holder, a reference
        # cycle that only the garbage collector would free once the graph is dropped without a
        # backward (autograd rebuilds the tensor it unpacks from the saved variable's metadata)
        held = _Held(t.detach())
        weakref.finalize(held, self._release, key)
        return held

    @staticmethod
    def _unpack(held):
        return held.tensor if isinstance(held, _Held) else held

    def __enter__(self) -> LiveSavedTensors:
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)
