"""What a real step holds beyond the parts `parts.py` names (lesson 05), each measured apart:

- the loss tensor's own storage. `F.mse_loss(..., reduction="sum" or "mean")` returns a 0-d
  tensor whose storage keeps one float per output element: its kernel computes the squared
  errors into a full-size output, reduces them into it and resizes it to 0-d, which keeps the
  storage (`TORCH_META_FUNC(mse_loss)` in aten/src/ATen/native/Loss.cpp, device-generic). It lives
  as long as the loss tensor, or any `.detach()` of it (a view of the same storage);
- what exists during `optimizer.step()` of a real step, read at the step itself.

Backward's temporaries (the gradients flowing between layers) are what a step's measured peak holds
beyond the estimate once the loss's buffer is gone: `step_peak_bytes(..., compact_loss=True)`.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate
from .. import device as dev
from .._validate import positive_int
from ..data import Data
from ..losses import Loss, get_loss
from .parts import param_bytes, tensor_bytes
from .step import device_of, memory_optimizer, train_step


def loss_storage(model: nn.Module, batch: Data, *, loss: str | Loss = "mse") -> dict[str, int]:
    """Bytes behind the loss of one forward of `model` on `batch` (a copy of the model, on its
    device): "output", the model's output; "loss", the storage of the 0-d loss tensor the loss
    function returns; "detached", the storage `loss.detach()` keeps alive; "clone", the storage of
    `loss.clone()`, a copy of the one number. (`loss.item()` keeps a Python float: no device
    memory.) Lesson 05."""
    _validate.model("model", model)
    _validate.data("batch", batch)
    loss_fn = get_loss(loss)
    net = copy.deepcopy(model)
    batch = batch.to(device_of(net))
    with torch.no_grad():  # the storages are the same with a graph; none is needed here
        output = net(batch.x)
        loss_sum, _ = loss_fn(output, batch.y)
    return {
        "output": tensor_bytes([output]),
        "loss": tensor_bytes([loss_sum]),
        "detached": tensor_bytes([loss_sum.detach()]),
        "clone": tensor_bytes([loss_sum.clone()]),
    }


def step_phase_bytes(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    optimizer: str = "adam",
    loss: str | Loss = "mse",
    foreach: bool | None = True,
    hold_last_batch: bool = False,
) -> int:
    """Most bytes alive during `optimizer.step()` of a real training step (`train_step` over `data`
    in micro-batches of `micro_batch_size`, the second step: the first creates the optimizer
    state), resting memory included, on a copy of `model`: the floor, measured at the moment it
    names. The bytes alive when `step()` begins are read from a meter started with the training
    step; the step's own peak above them from a second meter around `step()` alone. Lesson 05."""
    _validate.model("model", model)
    _validate.data("data", data)
    positive_int(
        "micro_batch_size", micro_batch_size, maximum=len(data), why="the number of samples in data"
    )
    hold_last_batch = _validate.flag("hold_last_batch", hold_last_batch)
    device = device_of(model)
    model = copy.deepcopy(model)
    opt = memory_optimizer(model, optimizer, foreach=foreach)
    micro = data.micro_batches(micro_batch_size)
    train_step(model, opt, micro, loss)  # creates the optimizer state: not measured
    opt.zero_grad(set_to_none=True)
    state = [t for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    resting = param_bytes(model) + tensor_bytes([t for t in state if t.device == device])
    dev.free_cache(device)
    seen: dict = {}

    def before_step(*_):
        seen["alive"] = outer.now()  # what the loop holds when step() begins
        seen["meter"] = dev.MemoryMeter(device).__enter__()

    def after_step(*_):
        meter = seen.pop("meter")
        meter.__exit__(None, None, None)
        seen["during"] = meter.peak  # above what existed when step() began

    handles = [opt.register_step_pre_hook(before_step), opt.register_step_post_hook(after_step)]
    try:
        with dev.MemoryMeter(device) as outer:
            train_step(model, opt, micro, loss, hold_last_batch=hold_last_batch)
    finally:
        for handle in handles:
            handle.remove()
    return resting + seen["alive"] + max(seen["during"], 0)
