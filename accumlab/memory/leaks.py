"""Loops that look like accumulation but keep graphs alive (lesson 05), measured with
`LiveSavedTensors`: how many bytes of saved activations are alive, and how big the graph behind a
running total grows."""

from __future__ import annotations

import copy

from torch import nn

from .. import _validate
from .._validate import one_of, positive_int
from ..data import Data
from ..losses import Loss, get_loss
from ..saved import LiveSavedTensors
from .step import device_of


def graph_nodes(value) -> int:
    """Autograd nodes reachable from `value.grad_fn`: what a tensor keeps alive behind it (0 for a
    plain number or a tensor without history)."""
    import numbers

    import torch

    if not isinstance(value, (torch.Tensor, numbers.Number)) or isinstance(value, bool):
        raise ValueError(
            f"value must be a tensor (or a plain number: 0 nodes), got {type(value).__name__} "
            f"{value!r:.60}"
        )
    root = getattr(value, "grad_fn", None)
    seen, stack = set(), [root] if root is not None else []
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        stack += [nxt for nxt, _ in fn.next_functions if nxt is not None]
    return len(seen)


LOOPS = ("full_batch", "accumulate", "sum_then_backward")


def peak_saved_bytes(
    model: nn.Module, data: Data, micro_batch_size: int, loop: str, *, loss: str | Loss = "mse"
) -> int:
    """Most bytes of saved activations alive at once while computing the gradient of `data`:

    - full_batch: one forward and one backward over everything;
    - accumulate: forward, then `(loss / k).backward()` per micro-batch (real accumulation);
    - sum_then_backward: `total = total + loss` per micro-batch, one backward at the end — looks
      like accumulation, but every micro-batch's graph stays alive until that backward.
    Works on a copy of `model`. Lesson 05.
    """
    one_of("loop", loop, LOOPS)
    _validate.model("model", model)
    _validate.data("data", data)
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    loss_fn = get_loss(loss)
    model = copy.deepcopy(model)
    data = data.to(device_of(model))
    micro = data.micro_batches(len(data) if loop == "full_batch" else micro_batch_size)
    k = len(micro)
    with LiveSavedTensors(exclude=[*model.parameters(), data.x, data.y]) as live:
        total = 0
        for mb in micro:
            loss_sum, count = loss_fn(model(mb.x), mb.y)
            if loop == "sum_then_backward":
                total = total + loss_sum / count / k
            else:
                (loss_sum / count / k).backward()
        if loop == "sum_then_backward":
            total.backward()
    return live.peak


def logging_growth(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    log: str = "tensor",
    backward: bool = True,
    no_grad: bool = False,
    loss: str | Loss = "mse",
) -> dict:
    """A loop that keeps a running `total_loss` for logging. After each micro-batch, record the
    graph nodes reachable from the total and the saved-activation bytes still alive.

    log="tensor": `total_loss += loss` (the bug); log="item": `total_loss += loss.item()`.
    backward=False is an evaluation loop; `no_grad=True` runs it under `torch.no_grad()` (no graph
    is built at all). Lesson 05.
    """
    import contextlib

    import torch

    one_of("log", log, ("tensor", "item"))
    _validate.model("model", model)
    _validate.data("data", data)
    _validate.flag("backward", backward)
    _validate.flag("no_grad", no_grad)
    if no_grad and backward:
        raise ValueError("no_grad=True needs backward=False: without a graph there is no backward")
    loss_fn = get_loss(loss)
    model = copy.deepcopy(model)
    data = data.to(device_of(model))
    micro = data.micro_batches(micro_batch_size)
    nodes, alive = [], []
    with LiveSavedTensors(exclude=[*model.parameters(), data.x, data.y]) as live:
        total_loss = 0.0
        for mb in micro:
            with torch.no_grad() if no_grad else contextlib.nullcontext():
                loss_sum, count = loss_fn(model(mb.x), mb.y)
                mean = loss_sum / count
            if backward:
                (mean / len(micro)).backward()
            total_loss += mean if log == "tensor" else mean.item()
            nodes.append(graph_nodes(total_loss))
            alive.append(live.bytes)
    return {
        "micro_steps": list(range(1, len(micro) + 1)),
        "graph_nodes": nodes,
        "alive_bytes": alive,
        "log": log,
        "backward": backward,
        "no_grad": no_grad,
    }
