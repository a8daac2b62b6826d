"""Choosing k (lesson 05): the largest micro-batch that fits a memory budget, and the number of
accumulation steps it implies for a target global batch.

The budget covers everything training allocates on the device: parameters, optimizer state,
gradients, one micro-batch of data with its saved activations, and every temporary (the data
itself stays in host memory). Two ways to decide what fits:

- "estimate": name the tensors and add them up (`Footprint.estimate`): parameters, optimizer
  state, gradients, then the larger of one micro-batch's data and saved activations and the
  optimizer step's temporaries. It cannot see the loss tensor's own storage or backward's
  temporaries, so it may pick a size that does not fit;
- "probe": run two real optimizer steps per candidate, largest first, under a cap of the budget,
  and measure their peak (`accumlab.device`): on CUDA a real out-of-memory error, on a CPU the
  emulated one. Retrying smaller after an out-of-memory error is what Accelerate's
  `find_executable_batch_size` does too; it reruns the user's whole function instead, with the
  batch size multiplied by 0.9 by default (`reduce_batch_size_fn`), and sets no cap.

On a GPU the budget is what the caching allocator may reserve for the step above what it held
before: the cuBLAS workspaces the warm-up creates, the CUDA context and other processes are
outside it (`torch.cuda.mem_get_info` tells what the device still has free).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from .. import _validate
from .. import device as dev
from .._validate import one_of, positive_int
from ..data import Data
from .checkpointing import checkpointed
from .parts import (
    activation_bytes,
    data_bytes,
    grad_bytes,
    optimizer_state_bytes,
    param_bytes,
)
from .peaks import Footprint, footprint, step_transient_bytes
from .step import device_of, memory_optimizer, train_step


@dataclass(frozen=True)
class Choice:
    """The micro-batch size picked, the k it implies (global batch = micro-batch × k), and how."""

    micro_batch_size: int
    accumulation_steps: int
    global_batch: int
    budget_bytes: int
    floor_bytes: int
    method: str  # "estimate" (named tensors) or "probe" (real steps, measured)
    tried: list[tuple[int, bool]] = field(default_factory=list)  # (micro-batch size, fitted?)
    needed: list[int | None] = field(default_factory=list)  # bytes each tried size needed

    def __str__(self) -> str:
        return (
            f"micro_batch_size={self.micro_batch_size}, k={self.accumulation_steps} "
            f"(global batch {self.global_batch}, budget {self.budget_bytes:,} B, "
            f"floor {self.floor_bytes:,} B, by {self.method})"
        )


def candidate_sizes(global_batch: int) -> list[int]:
    """Divisors of the global batch, largest first: every micro-batch then has the same size, so
    `loss / k` weighs every sample equally (lesson 03)."""
    global_batch = positive_int("global_batch", global_batch)
    return [m for m in range(global_batch, 0, -1) if global_batch % m == 0]


def floor_bytes(model: nn.Module, optimizer: str = "adam", *, foreach: bool | None = True) -> int:
    """What no micro-batch size can remove: during `optimizer.step()` the parameters, gradients,
    optimizer state and the step's temporaries exist at once. Lesson 05."""
    _validate.model("model", model)
    return (
        param_bytes(model)
        + grad_bytes(model)
        + optimizer_state_bytes(model, optimizer)
        + step_transient_bytes(model, optimizer, foreach=foreach)
    )


def _check_budget(budget_bytes: int, floor: int) -> None:
    if budget_bytes < floor:
        raise ValueError(
            f"budget_bytes={budget_bytes:,} is {floor - budget_bytes:,} bytes below the floor of "
            f"{floor:,} bytes (parameters, gradients, optimizer state and the optimizer "
            "step's temporaries), which no micro-batch size can remove: raise the budget or use "
            "a smaller model or a lighter optimizer"
        )


def probe(
    candidates: list[int],
    attempt: Callable[[int], object],
    *,
    on_oom: Callable[[], None] = lambda: dev.free_cache(
        "cuda" if torch.cuda.is_available() else "cpu"
    ),
) -> tuple[int | None, list[tuple[int, bool]]]:
    """Try `attempt(m)` for each candidate, largest first; an out-of-memory error is caught, the
    cache freed, and the next (smaller) candidate tried. Any other error propagates. Returns the
    first size that ran (None if none did) and the list of (size, fitted?) tried."""
    tried = []
    for m in candidates:
        fitted = True
        try:
            attempt(m)
        except torch.OutOfMemoryError:
            fitted = (
                False  # free only after the except block: its traceback holds the step's tensors
            )
        tried.append((m, fitted))
        if fitted:
            return m, tried
        on_oom()
    return None, tried


def _estimate(model, data, global_batch, budget, optimizer, loss, segments, foreach) -> Choice:
    base = footprint(model, data, global_batch, optimizer=optimizer, foreach=foreach, measure=False)
    _check_budget(budget, base.floor)
    tried, needed = [], []
    for m in candidate_sizes(global_batch):
        batch = data.micro_batches(m)[0]
        acts = activation_bytes(model, batch, segments=segments, loss=loss)
        fp = Footprint(
            **{
                **base.as_dict(),
                "data": data_bytes(batch),
                "activations": acts,
                "accumulation_steps": global_batch // m,
            }
        )
        tried.append((m, fp.estimate <= budget))
        needed.append(fp.estimate)
        if fp.estimate <= budget:
            return Choice(
                m, global_batch // m, global_batch, budget, base.floor, "estimate", tried, needed
            )
    raise ValueError(
        f"budget_bytes={budget:,} is {needed[-1] - budget:,} bytes short of the {needed[-1]:,} "
        f"bytes even micro_batch_size=1 needs (floor {base.floor:,}, or the resting memory with "
        "one sample's data and saved activations)"
    )


def _probe(model, data, global_batch, budget, optimizer, loss, segments, foreach) -> Choice:
    device = device_of(model)
    floor = floor_bytes(model, optimizer, foreach=foreach)
    _check_budget(budget, floor)
    if budget > dev.total_memory(device):
        raise ValueError(
            f"budget_bytes={budget:,} exceeds the {dev.total_memory(device):,} bytes of "
            f"{dev.device_name(device)}"
        )
    if device.type == "cuda":
        # the CUDA context and other processes hold memory outside this allocator: this process
        # can use what the device has free plus what its allocator already holds
        room = torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device)
        if budget > room:
            raise ValueError(
                f"budget_bytes={budget:,} exceeds the {room:,} bytes this process can use on "
                f"{dev.device_name(device)} (free on the device, by torch.cuda.mem_get_info, plus "
                "what its allocator holds): the CUDA context and other processes take the rest"
            )
    resident = param_bytes(model)  # already on the device: inside the budget (the data is not)
    # trials train `model` itself, so the device holds exactly what real training would (a copy
    # would count the parameters twice); its weights are restored from a CPU backup after
    backup = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    needed: list[int | None] = []

    def attempt(m: int) -> None:
        net, micro = checkpointed(model, segments), data.micro_batches(m)

        def two_steps():
            opt = memory_optimizer(model, optimizer, foreach=foreach)
            train_step(net, opt, micro, loss)  # the first step creates the optimizer state
            opt.zero_grad(set_to_none=True)
            train_step(net, opt, micro, loss)  # its state, gradients and temporaries: all counted
            model.zero_grad(set_to_none=True)

        needed.append(None)  # unknown when the allocator refuses part-way (a real OOM)
        try:
            _, peak = dev.run_capped(two_steps, device, budget - resident)
        except torch.OutOfMemoryError as err:
            if getattr(err, "peak_bytes", None) is not None:  # the CPU stand-in measured it
                needed[-1] = resident + err.peak_bytes
            raise
        finally:
            model.zero_grad(set_to_none=True)
        needed[-1] = resident + peak.peak
        if needed[-1] > budget:  # the CUDA cap is on reserved blocks: check what was allocated too
            raise torch.OutOfMemoryError(f"micro-batch {m} allocated {needed[-1]:,} > {budget:,}")

    dev.free_cache(device)
    # on a GPU the first matrix multiply on a thread creates that thread's cuBLAS workspace, kept
    # for the process (CublasHandlePool.cpp), and backward runs on a device thread of its own: one
    # forward and one backward let both workspaces exist before any trial is measured. Two rows:
    # addmm takes the cuBLASLt path, with a workspace of its own, only for more than one row
    model(data.x[:2].to(device)).float().sum().backward()
    model.zero_grad(set_to_none=True)
    try:
        m, tried = probe(
            candidate_sizes(global_batch), attempt, on_oom=lambda: dev.free_cache(device)
        )
    finally:
        model.load_state_dict(backup)
        dev.free_cache(device)
    if m is None:
        raise ValueError(
            f"budget_bytes={budget:,}: even micro_batch_size=1 ran out of memory on "
            f"{dev.device_name(device)} (floor {floor:,} bytes)"
        )
    return Choice(m, global_batch // m, global_batch, budget, floor, "probe", tried, needed)


def choose_micro_batch(
    model: nn.Module,
    data: Data,
    budget_bytes: int,
    *,
    global_batch: int | None = None,
    optimizer: str = "adam",
    loss="mse",
    segments: int = 0,
    foreach: bool | None = True,
    method: str = "auto",
) -> Choice:
    """The largest micro-batch size dividing `global_batch` (default `len(data)`) whose training
    step fits in `budget_bytes` on the model's device, and k = global_batch / micro_batch_size.
    method "estimate" or "probe" (see the module's docstring); "auto" probes, on any device (on
    a CPU the peak comes from the storage tracker and out-of-memory is emulated). A budget below
    the floor is a ValueError saying by how much. Lesson 05."""
    _validate.model("model", model)
    _validate.data("data", data)
    budget_bytes = positive_int("budget_bytes", budget_bytes)
    one_of("method", method, ("auto", "estimate", "probe"))
    global_batch = len(data) if global_batch is None else positive_int("global_batch", global_batch)
    if global_batch > len(data):
        raise ValueError(
            f"global_batch must be at most the {len(data)} samples in data, got {global_batch}"
        )
    data = data[:global_batch]  # stays where it is: train_step copies each micro-batch over
    run = _estimate if method == "estimate" else _probe
    return run(model, data, global_batch, budget_bytes, optimizer, loss, segments, foreach)
