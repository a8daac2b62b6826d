"""The rows a forward received, as the observers record them: their count, a plain copy, and
their exact values as a dict key (to tell which micro-batch a forward was fed)."""

from __future__ import annotations

import torch


def _rows(args: tuple, kwargs: dict) -> int | None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return int(value.shape[0]) if value.dim() else 1
    return None


def _first_tensor(args: tuple, kwargs: dict) -> torch.Tensor | None:
    """A plain copy of the first tensor argument (a tensor subclass's own methods not run)."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            with torch._C.DisableTorchFunctionSubclass():
                return value.detach().clone().as_subclass(torch.Tensor)
    return None


def _rows_key(x: torch.Tensor | None):
    """The rows' exact values as a dict key (a float64 copy: integer token ids are exact in it)."""
    if x is None:
        return None
    with torch._C.DisableTorchFunctionSubclass():
        flat = x.detach().to("cpu", torch.float64).contiguous()
        return tuple(flat.shape), flat.numpy().tobytes()
