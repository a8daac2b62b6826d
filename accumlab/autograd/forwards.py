"""Lesson 01: forwards that save, besides activations, tensors computed from the parameters alone.

Such a tensor does not grow with the batch: one batched forward saves it once, a loop of n forwards
n times. Two real cases: `weight_norm` (torch.nn.utils.parametrizations) recomputes each weight
from its direction and norm on every forward, and autocast casts each leaf weight to a 16-bit copy
once per autocast region (its weight cache is emptied when the outermost region ends).
"""

from __future__ import annotations

import contextlib
import copy

import torch

from .. import _validate

AUTOCAST_DTYPE = torch.bfloat16  # the 16-bit type CPU autocast supports on every torch here


def weight_normed(model):
    """Lesson 01: a copy of `model` with `weight_norm` on each `nn.Linear` — the same function
    (weight_norm starts from the layer's own weight), but every forward now computes each weight
    from its direction and norm, and saves what that computation's backward needs."""
    from torch.nn.utils.parametrizations import weight_norm

    _validate.model("model", model)
    model = copy.deepcopy(model)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    if not linears:
        raise ValueError(
            f"model ({type(model).__name__}) has no nn.Linear layer to put weight_norm on"
        )
    for layer in linears:
        weight_norm(layer)
    return model


def check_autocast(model, data, autocast) -> bool:
    """`autocast` is a bool; with it, the model and data must be float32: autocast casts float32
    to 16 bits and leaves float64 alone, so a float64 model would show no autocast at all."""
    autocast = _validate.flag("autocast", autocast)
    if autocast:
        dtype = next(model.parameters()).dtype
        if dtype != torch.float32 or data.x.dtype != torch.float32:
            raise ValueError(
                f"autocast=True needs a float32 model and data (autocast leaves {dtype} alone), "
                f"got a {dtype} model and {data.x.dtype} data: pass model.float() and "
                "data.to(torch.float32)"
            )
    return autocast


def region(autocast: bool, device: torch.device):
    """One autocast region (bfloat16) around one forward, or nothing."""
    if not autocast:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=AUTOCAST_DTYPE)
