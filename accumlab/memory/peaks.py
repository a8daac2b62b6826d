"""Measured memory of a real optimizer step (lesson 05), on any device through `accumlab.device`:
the CUDA allocator's counters on a GPU, a tracker of every tensor storage on the CPU.

Between steps a training process holds its *resting* memory on the device: parameters and
optimizer state (the data stays in host memory). A step adds the gradients, one micro-batch at a
time its data and saved activations, and temporaries: the loss tensor's own storage (see
`excess.py`), backward's intermediate gradients, and those of `optimizer.step()` itself (foreach
Adam computes sqrt(exp_avg_sq) for every parameter at once: about one more copy of the
parameters). `Footprint` names each part and compares their sum with the measured peak.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from .. import _validate
from .. import device as dev
from .._validate import positive_int
from ..data import Data
from .checkpointing import checkpointed
from .parts import activation_bytes, data_bytes, grad_bytes, optimizer_state_bytes, param_bytes
from .step import device_of, memory_optimizer, train_step


def step_transient_bytes(
    model: nn.Module, optimizer: str = "adam", *, foreach: bool | None = True, fused: bool = False
) -> int:
    """Most bytes `optimizer.step()` allocates above what exists before it (parameters, gradients,
    state), measured on a copy of `model` at its second step (the first creates the state);
    `fused=True` measures the optimizer's fused kernel instead."""
    _validate.model("model", model)
    model = copy.deepcopy(model)
    opt = memory_optimizer(model, optimizer, foreach=foreach, fused=fused)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    _, peak = dev.measure_peak(opt.step, device_of(model))
    return max(peak.peak, 0)


def step_peak_bytes(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    optimizer: str = "adam",
    segments: int = 0,
    loss="mse",
    foreach: bool | None = True,
    hold_last_batch: bool = False,
    compact_loss: bool = False,
) -> int:
    """Measured peak of one optimizer step over `data` in micro-batches, above the resting state
    (parameters and optimizer state exist; gradients do not), on a copy of `model`. It holds the
    gradients, each micro-batch's copy on the device, saved activations and every temporary;
    with `hold_last_batch=True`, the last micro-batch's copy during `optimizer.step()` too; with
    `compact_loss=True`, without the loss's output-sized storage (see `train_step`)."""
    return step_peak(
        model, data, micro_batch_size, optimizer=optimizer, segments=segments, loss=loss,
        foreach=foreach, hold_last_batch=hold_last_batch, compact_loss=compact_loss,
    ).peak  # fmt: skip


def step_peak(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    optimizer: str = "adam",
    segments: int = 0,
    loss="mse",
    foreach: bool | None = True,
    hold_last_batch: bool = False,
    compact_loss: bool = False,
) -> dev.Peak:
    """`step_peak_bytes` as a `Peak`: on CUDA also the bytes of new segments the allocator reserved
    (measured after handing its cached, unused segments back). `hold_last_batch=True` keeps the
    last micro-batch alive through `optimizer.step()`, as a plain loop does (see `train_step`)."""
    _validate.model("model", model)
    _validate.data("data", data)
    _validate.flag("hold_last_batch", hold_last_batch)
    _validate.flag("compact_loss", compact_loss)
    device = device_of(model)
    model = copy.deepcopy(model)
    net = checkpointed(model, segments)
    opt = memory_optimizer(model, optimizer, foreach=foreach)
    micro = data.micro_batches(micro_batch_size)  # in host memory: train_step copies each one
    train_step(net, opt, micro, loss)  # the first step creates the optimizer state: not measured
    opt.zero_grad(set_to_none=True)
    if device.type == "cuda":  # hand cached segments back: what the step reserves, it needed
        dev.free_cache(device)
    _, peak = dev.measure_peak(
        lambda: train_step(
            net, opt, micro, loss, hold_last_batch=hold_last_batch, compact_loss=compact_loss
        ),
        device,
    )
    return peak


@dataclass(frozen=True)
class Footprint:
    """Bytes per part of training memory for one micro-batch size, and the measured peak. Lesson 05.

    `resting` is what exists between steps (parameters, optimizer state); `floor` what exists
    during `optimizer.step()` (no micro-batch size can remove it); `forward_end` what exists when a
    micro-batch's forward has saved all its activations: its data (one micro-batch, copied to the
    device) and, from the second micro-batch of a window on, the gradients. `estimate` = the
    larger of the two moments. `peak` is measured: it also holds the loss tensor's own storage and
    backward's temporaries, which no tensor count names, so peak ≥ estimate."""

    params: int
    grads: int
    optimizer_state: int
    step_transient: int
    data: int
    activations: int
    accumulation_steps: int
    peak: int | None = None

    @property
    def resting(self) -> int:
        return self.params + self.optimizer_state

    @property
    def floor(self) -> int:
        return self.resting + self.grads + self.step_transient

    @property
    def forward_end(self) -> int:
        grads = self.grads if self.accumulation_steps > 1 else 0
        return self.resting + grads + self.data + self.activations

    @property
    def estimate(self) -> int:
        return max(self.forward_end, self.floor)

    def parts(self) -> dict[str, int]:
        return {
            "parameters": self.params,
            "optimizer state": self.optimizer_state,
            "gradients": self.grads,
            "optimizer-step temporaries": self.step_transient,
            "micro-batch data": self.data,
            "saved activations": self.activations,
        }

    def as_dict(self) -> dict:
        return asdict(self)


def footprint(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    optimizer: str = "adam",
    segments: int = 0,
    loss="mse",
    foreach: bool | None = True,
    measure: bool = True,
) -> Footprint:
    """The memory breakdown of training `model` on micro-batches of `micro_batch_size` from the
    global batch `data` (in host memory; one micro-batch at a time on the model's device), with
    the measured peak unless `measure=False`. Lesson 05."""
    _validate.model("model", model)
    _validate.data("data", data)
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    _validate.flag("measure", measure)
    batch = data.micro_batches(micro_batch_size)[0]
    fp = Footprint(
        params=param_bytes(model),
        grads=grad_bytes(model, batch, loss=loss),  # the .grad storages after a real backward
        optimizer_state=optimizer_state_bytes(model, optimizer),
        step_transient=step_transient_bytes(model, optimizer, foreach=foreach),
        data=data_bytes(batch),
        activations=activation_bytes(model, batch, segments=segments, loss=loss),
        accumulation_steps=math.ceil(len(data) / micro_batch_size),
    )
    if not measure:
        return fp
    above = step_peak_bytes(
        model,
        data,
        micro_batch_size,
        optimizer=optimizer,
        segments=segments,
        loss=loss,
        foreach=foreach,
    )
    return Footprint(**{**fp.as_dict(), "peak": fp.resting + above})


def memory_sweep(
    model: nn.Module,
    data: Data,
    micro_sizes: list[int],
    *,
    optimizer: str = "adam",
    segments: int = 0,
    loss="mse",
    foreach: bool | None = True,
    peak_sizes: list[int] | None = None,
    progress: bool = False,
) -> dict:
    """At the fixed global batch `len(data)`, for each micro-batch size: saved activations, the
    estimate and (for the sizes in `peak_sizes`, default all) the measured peak; and the parts that
    do not depend on it. Plain lists and ints, ready for JSON. Lesson 05."""
    from tqdm.auto import tqdm

    _validate.model("model", model)
    _validate.data("data", data)
    samples = "the number of samples in data"
    sizes = _validate.positive_ints("micro_sizes", micro_sizes, maximum=len(data), why=samples)
    if peak_sizes is not None:
        peak_sizes = _validate.positive_ints(
            "peak_sizes", peak_sizes, maximum=len(data), why=samples
        )
    measured = set(sizes if peak_sizes is None else peak_sizes)
    kw = dict(optimizer=optimizer, segments=segments, loss=loss, foreach=foreach)
    # the parts that do not depend on the micro-batch size are measured once
    base = footprint(model, data, sizes[0], measure=False, **kw).as_dict()
    rows = []
    for m in tqdm(sizes, desc="micro-batch sizes", disable=not progress):
        batch = data.micro_batches(m)[0]
        fp = Footprint(
            **{
                **base,
                "data": data_bytes(batch),
                "activations": activation_bytes(model, batch, segments=segments, loss=loss),
                "accumulation_steps": math.ceil(len(data) / m),
            }
        )
        peak = fp.resting + step_peak_bytes(model, data, m, **kw) if m in measured else None
        rows.append(Footprint(**{**fp.as_dict(), "peak": peak}))
    first = rows[0]
    return {
        "global_batch": len(data),
        "micro_sizes": sizes,
        "accumulation_steps": [r.accumulation_steps for r in rows],
        "activations": [r.activations for r in rows],
        "data": [r.data for r in rows],
        "estimate": [r.estimate for r in rows],
        "peak": [r.peak for r in rows],
        "resting": first.resting,
        "floor": first.floor,
        # the parts no micro-batch size changes
        "parts": {
            k: v
            for k, v in first.parts().items()
            if k not in ("saved activations", "micro-batch data")
        },
        "optimizer": optimizer,
        "foreach": foreach,
        "segments": segments,
        "device": str(device_of(model)),
    }
