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
    backward, measured with saved-tensor hooks that notice when autograd releases them; the bytes
    still alive as backward starts each node ("during_backward": [node name, bytes] in the order
    backward ran them); the number of nodes behind the loss before and after; whether every
    parameter's `.grad` was filled; and the bytes alive after a second forward ("before_drop") and
    once its loss is dropped without any backward ("after_drop").

    Parameters and data are excluded: they stay alive whatever backward does."""
    _validate.model("model", model)
    _validate.data("data", data)
    loss_fn = get_loss(loss)
    model = copy.deepcopy(model)  # the caller's model and its .grad stay untouched

    def mean_loss():
        total, count = loss_fn(forward(model, data, "the whole data"), data.y)
        return total / max(count, 1)

    during: list[list] = []
    with LiveSavedTensors(exclude=[*model.parameters(), data.x, data.y]) as live:
        value = mean_loss()
        after_forward, nodes_before = live.bytes, count_nodes(value)
        for node in _nodes(value.grad_fn):  # a pre-hook runs just before backward runs the node
            node.register_prehook(_noting(during, node, live))
        value.backward()
        after_backward, nodes_after = live.bytes, count_nodes(value)
        dropped = mean_loss()
        before_drop = live.bytes
        del dropped  # the last reference to its graph: the graph goes, and what it saved with it
        after_drop = live.bytes
    return {
        "after_forward": after_forward,
        "during_backward": during,
        "after_backward": after_backward,
        "nodes_before": nodes_before,
        "nodes_after": nodes_after,
        "grads_filled": all(p.grad is not None for p in model.parameters()),
        "before_drop": before_drop,
        "after_drop": after_drop,
    }


def _noting(during: list, node, live: LiveSavedTensors):
    return lambda _grads: during.append([type(node).__name__, live.bytes])


def _nodes(root) -> list:
    """Every node reachable from `root` through next_functions, each once."""
    seen, stack = {}, [root]
    while stack:
        node = stack.pop()
        if node is not None and id(node) not in seen:
            seen[id(node)] = node
            stack.extend(next_node for next_node, _ in node.next_functions)
    return list(seen.values())
