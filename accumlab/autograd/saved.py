"""Lesson 01: which tensors one node saves, and what backward releases."""

from __future__ import annotations

import copy

import torch

from .. import _validate
from ..engine import forward
from ..graph import count_nodes
from ..losses import get_loss
from ..saved import LiveSavedTensors


def saved_tensors_of(grad_fn) -> dict[str, torch.Tensor | None]:
    """The tensors a backward node keeps for backward, read from its `_saved_*` attributes (the
    names PyTorch's autograd notes use to show them). None where the node saved nothing because no
    gradient needs it. Reading them after backward raises PyTorch's RuntimeError: they were freed.
    Lesson 01."""
    if grad_fn is None or not hasattr(grad_fn, "next_functions"):
        raise ValueError(f"grad_fn must be a backward node (tensor.grad_fn), got {grad_fn!r}")
    out = {}
    for name in sorted(dir(grad_fn)):
        if name.startswith("_saved_"):
            value = getattr(grad_fn, name)
            if value is None or isinstance(value, torch.Tensor):  # tensors, not saved sizes
                out[name.removeprefix("_saved_")] = value
    return out


def saved_bytes_around_backward(model, data, *, loss: str = "mse") -> dict:
    """Lesson 01: bytes of saved-for-backward tensors alive after one forward and after its
    backward, measured with saved-tensor hooks that notice when autograd releases them; the number
    of nodes behind the loss before and after; and whether every parameter's `.grad` was filled.

    Parameters and data are excluded: they stay alive whatever backward does."""
    _validate.model("model", model)
    _validate.data("data", data)
    loss_fn = get_loss(loss)
    model = copy.deepcopy(model)  # the caller's model and its .grad stay untouched
    with LiveSavedTensors(exclude=[*model.parameters(), data.x, data.y]) as live:
        total, count = loss_fn(forward(model, data, "the whole data"), data.y)
        value = total / max(count, 1)
        after_forward, nodes_before = live.bytes, count_nodes(value)
        value.backward()
        after_backward, nodes_after = live.bytes, count_nodes(value)
    return {
        "after_forward": after_forward,
        "after_backward": after_backward,
        "nodes_before": nodes_before,
        "nodes_after": nodes_after,
        "grads_filled": all(p.grad is not None for p in model.parameters()),
    }
