"""What a real step holds beyond the parts `parts.py` names (lesson 05), each measured apart:

- the loss tensor's own storage. `F.mse_loss(..., reduction="sum" or "mean")` returns a 0-d
  tensor whose storage keeps one float per output element: its meta function allocates a
  full-size output and resizes its shape, not its storage, to 0-d (`TORCH_META_FUNC(mse_loss)` in
  aten/src/ATen/native/Loss.cpp, device-generic). It lives as long as the loss tensor, or any
  `.detach()` of it (a view of the same storage);
- the loss kernel's own temporary: `TORCH_IMPL_FUNC(mse_loss_out)` writes the squared errors into
  a second full-size buffer, reduces it into the output and frees it before returning. A storage
  tracker at the Python dispatch level never sees it (it is allocated below it); a GPU's caching
  allocator counts it, so a GPU peak that falls inside the loss is higher than the tracker's;
- what exists during `optimizer.step()` of a real step, read at the step itself.

Backward's temporaries (the gradients flowing between layers) are what a step's measured peak holds
beyond the estimate once the loss's buffer is gone, as far as the tracker sees:
`step_peak_bytes(..., compact_loss=True)`.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

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
    memory.) "temporary": the bytes the loss function's kernels allocate and free before it
    returns, from the profiler's allocation counts (what its inner operations allocate, plus the
    returned storage, less what the call still holds when it returns). For `F.mse_loss` that is
    one output-sized buffer allocated inside its kernel, which a dispatch-level storage tracker
    does not see, plus one float per thread when its sum splits across CPU threads. Lesson 05."""
    _validate.model("model", model)
    _validate.data("batch", batch)
    loss_fn = get_loss(loss)
    net = copy.deepcopy(model)
    batch = batch.to(device_of(net))
    with torch.no_grad():  # the storages are the same with a graph; none is needed here
        output = net(batch.x)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            loss_sum, _ = loss_fn(output, batch.y)
    returned = tensor_bytes([loss_sum])
    return {
        "output": tensor_bytes([output]),
        "loss": returned,
        "detached": tensor_bytes([loss_sum.detach()]),
        "clone": tensor_bytes([loss_sum.clone()]),
        "temporary": _freed_inside(prof.events(), returned),
    }


def _freed_inside(events, returned: int) -> int:
    """Bytes allocated and freed inside the profiled calls: the allocations of their inner
    operations plus the `returned` storage (allocated by the outer operation itself), less the
    net bytes the outer operations still hold. An operation's own count is net of its frees, so
    the outer one's allocation is not in the events apart from what it returns."""
    tops = [e for e in events if e.cpu_parent is None]
    inner, stack = 0, [c for e in tops for c in e.cpu_children]
    while stack:
        e = stack.pop()
        inner += max(e.self_cpu_memory_usage, 0)
        stack.extend(e.cpu_children)
    held = sum(e.cpu_memory_usage for e in tops)
    return inner + returned - held


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
