"""Mixed precision with accumulation: autocast + GradScaler, in the right order and the wrong ones
(lesson 06).

The right order for one window of k micro-batches:

    for each micro-batch:  scaler.scale(loss / k).backward()     # same scale all window long
    at the window's end:   scaler.unscale_(opt); clip; scaler.step(opt); scaler.update()

CPU autocast uses bfloat16 by default (float32's exponent range, so scaling is not needed there
but works the same way); CUDA uses float16, whose small range is what GradScaler exists for. CPU
autocast also runs float16 (`dtype="float16"`): the CPU stand-in of a GPU run uses it, the same
code path, though a GPU's kernels round differently and may skip other windows.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from .. import _validate
from .._validate import one_of, positive_float, positive_int
from ..data import Data
from ..device import as_device
from ..engine import grads_of, params_of
from ..losses import get_loss
from ..optim import make_optimizer
from ..run_inputs import check_scheduler, forward

# correct                          — unscale_/clip/step/update once, at the window's end
# unscale_every_micro_step         — unscale_ after every backward: torch raises on the second one
# update_every_micro_step          — update() after every backward: torch raises (no inf check yet)
# unscale_update_every_micro_step  — the "fix" that silences both errors: unscale_ + update() after
#                                    every backward. It runs, but the scale changes inside the window
#                                    and gradients already unscaled are divided by the scale again.
# optimizer_step_not_scaler_step   — unscale_, clip, then optimizer.step() instead of
#                                    scaler.step(optimizer): nothing checks for inf/NaN, so one
#                                    overflowing micro-batch puts inf/NaN into the weights.
AMP_ORDERS = (
    "correct",
    "unscale_every_micro_step",
    "update_every_micro_step",
    "unscale_update_every_micro_step",
    "optimizer_step_not_scaler_step",
)
PRECISIONS = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# What the learning-rate scheduler does on a window whose step GradScaler skipped:
#   step — step it anyway: the schedule follows the windows of data seen (Lightning does this)
#   hold — do not step it: the schedule follows the updates applied (Accelerate's
#          `optimizer_step_was_skipped`, and the Transformers Trainer, do this)
SKIP_CONVENTIONS = ("step", "hold")


def autocast_dtype(device: str | torch.device) -> torch.dtype:
    """The low-precision dtype autocast uses on `device`: float16 on CUDA, bfloat16 on CPU
    (a question about the device type: no CUDA device is needed to ask it)."""
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device must be a device such as 'cpu' or 'cuda', got {device!r}"
        ) from None
    return torch.float16 if kind == "cuda" else torch.bfloat16


def cpu_grad_scaler_supported() -> bool:
    """True when this torch's GradScaler accepts device "cpu" (torch >= 2.3)."""
    try:
        torch.amp.GradScaler("cpu")
    except (AttributeError, TypeError, RuntimeError, ValueError):
        return False
    return True


@dataclass
class AmpTrace:
    """What `amp_train` observed; lists are per micro-step or per window (= optimizer step)."""

    order: str
    device: str
    dtype: str
    micro_scales: list[float] = field(default_factory=list)  # scale each backward used
    window_scales: list[float] = field(default_factory=list)  # scale after each window's update
    skipped: list[bool] = field(default_factory=list)  # optimizer step skipped (inf/NaN found)
    window_grads: list[dict[str, torch.Tensor]] = field(default_factory=list)  # what step() saw
    params: list[dict[str, torch.Tensor]] = field(default_factory=list)  # after each window
    initial_params: dict[str, torch.Tensor] = field(default_factory=dict)
    clip_norms: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)  # lr of each window's step, applied or skipped
    update_norms: list[float] = field(default_factory=list)  # ‖Δparams‖ of each optimizer step

    @property
    def finite_params(self) -> list[bool]:
        """Per window: are all weights still finite after its step?"""
        return [all(bool(torch.isfinite(v).all()) for v in p.values()) for p in self.params]

    @property
    def scale_changes_inside_windows(self) -> int:
        """How many times the scale differed between two backwards of the same window."""
        k = len(self.micro_scales) // max(len(self.window_scales), 1)
        windows = [self.micro_scales[i : i + k] for i in range(0, len(self.micro_scales), k)]
        return sum(a != b for w in windows for a, b in zip(w, w[1:], strict=False))


def amp_train(
    model: nn.Module,
    data: Data,
    *,
    micro_batch_size: int,
    accumulation_steps: int,
    order: str = "correct",
    device: str | torch.device = "cpu",
    enabled: bool = True,
    max_norm: float | None = None,
    optimizer: str | Callable = "sgd",
    lr: float = 0.1,
    scheduler: Callable | None = None,
    init_scale: float = 2.0**16,
    growth_interval: int = 2000,
    overflow_micro_steps: tuple[int, ...] = (),
    dtype: str | None = None,
    scheduler_on_skip: str = "step",
    unscale: bool = True,
) -> AmpTrace:
    """Train a copy of `model` (float32) on `data` with autocast + GradScaler in `order`. Lesson 06.

    `enabled=False` runs the same loop in plain float32 (the reference). `overflow_micro_steps`
    lists global micro-step indices whose loss is made infinite, as a float16 overflow would.
    `dtype` is autocast's ("float16" or "bfloat16"; default: float16 on CUDA, bfloat16 on CPU).
    `scheduler_on_skip` says what `scheduler` does after a skipped step (SKIP_CONVENTIONS).
    `unscale=False` leaves out the window's explicit `unscale_`: `scaler.step` then unscales (a
    fused optimizer inside its kernel; `window_grads` then hold scaled gradients); clipping needs
    the explicit one, so no `max_norm` then.
    Every window must be full: `len(data)` a multiple of micro_batch_size × accumulation_steps.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    one_of("order", order, AMP_ORDERS)
    _validate.flag("enabled", enabled)
    overflow_micro_steps = [
        positive_int(f"overflow_micro_steps[{i}]", s, minimum=0)
        for i, s in enumerate(
            _validate.sequence("overflow_micro_steps", overflow_micro_steps, allow_empty=True)
        )
    ]
    if scheduler is not None:
        _validate.function("scheduler", scheduler)
    one_of("scheduler_on_skip", scheduler_on_skip, SKIP_CONVENTIONS)
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    k = positive_int("accumulation_steps", accumulation_steps)
    growth_interval = positive_int("growth_interval", growth_interval)
    init_scale = positive_float("init_scale", init_scale)
    if not math.isfinite(init_scale):  # inf × loss is inf: every step skipped, and inf / 2 = inf
        raise ValueError(f"init_scale must be a finite number > 0, got {init_scale!r}")
    if max_norm is not None:
        max_norm = positive_float("max_norm", max_norm)
    _validate.flag("unscale", unscale)
    if not unscale and max_norm is not None:  # clipping before unscale_ meets scaled gradients
        raise ValueError(
            f"unscale=False cannot clip (unscale_ comes first), got max_norm={max_norm}"
        )
    if len(data) % (micro_batch_size * k):
        raise ValueError(
            f"len(data)={len(data)} must be a multiple of micro_batch_size × accumulation_steps "
            f"= {micro_batch_size * k}"
        )
    device = as_device(device)
    if dtype is not None:
        one_of("dtype", dtype, ("float16", "bfloat16"))
    dtype = PRECISIONS[dtype] if dtype is not None else autocast_dtype(device)
    model = copy.deepcopy(model).to(device=device, dtype=torch.float32)
    data = data.to(device=device, dtype=torch.float32)
    opt = make_optimizer(optimizer, model.parameters(), lr)
    sched = check_scheduler(scheduler(opt)) if scheduler is not None else None
    stepped = []  # GradScaler skips by not calling optimizer.step(): this hook sees each real one
    opt.register_step_post_hook(lambda *_: stepped.append(True))
    scaler = torch.amp.GradScaler(
        device.type, init_scale=init_scale, growth_interval=growth_interval, enabled=enabled
    )
    trace = AmpTrace(
        order, device.type, str(dtype if enabled else torch.float32).removeprefix("torch.")
    )
    trace.initial_params = params_of(model)
    micro = data.micro_batches(micro_batch_size)
    step = 0
    for w in range(0, len(micro), k):
        opt.zero_grad(set_to_none=True)
        for mb in micro[w : w + k]:
            with torch.autocast(device.type, dtype=dtype, enabled=enabled):
                pred = forward(model, mb, f"micro-batch {step}")
            get_loss("mse").check(pred, mb.y)  # (n, 1) against (n,) would broadcast silently
            # the loss in float32: autocast leaves reductions to the caller's care
            loss = torch.nn.functional.mse_loss(pred.float(), mb.y) / k  # loss / k, as without AMP
            if step in overflow_micro_steps:
                loss = loss * float("inf")  # stands in for a float16 overflow in this micro-batch
            trace.micro_scales.append(scaler.get_scale() if enabled else 1.0)
            scaler.scale(loss).backward()
            if order in ("unscale_every_micro_step", "unscale_update_every_micro_step"):
                scaler.unscale_(opt)  # wrong: once per window, after the last backward
            if order in ("update_every_micro_step", "unscale_update_every_micro_step"):
                scaler.update()  # wrong: changes the scale while the window still accumulates
            step += 1
        before = params_of(model)
        if order != "unscale_every_micro_step" and unscale:  # (that loop already unscaled)
            scaler.unscale_(opt)  # once: .grad now holds the true window gradient
        if max_norm is not None:  # clip after unscale_, or the threshold meets scaled gradients
            trace.clip_norms.append(
                float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
            )
        trace.window_grads.append(grads_of(model))
        trace.lrs.append(float(opt.param_groups[0]["lr"]))
        finite = all(
            bool(torch.isfinite(p.grad).all()) for p in model.parameters() if p.grad is not None
        )
        stepped.clear()
        if enabled and order == "optimizer_step_not_scaler_step":
            opt.step()  # wrong: no inf check, so an inf/NaN gradient goes into the weights
            scaler.update()  # (it finds the inf check unscale_ recorded: no error)
        elif enabled:
            scaler.step(opt)  # skipped when unscale_ found an inf/NaN anywhere in the window
            # a fused optimizer is always called: its kernel reads the inf flag and skips itself
            in_kernel = getattr(opt, "_step_supports_amp_scaling", False)
            if in_kernel and any(float(f) for f in scaler._found_inf_per_device(opt).values()):
                stepped.clear()
            scaler.update()
        elif finite:  # the float32 reference skips as the scaler would
            opt.step()
        skipped = not stepped
        if sched is not None and not (skipped and scheduler_on_skip == "hold"):
            sched.step()  # once per optimizer step (and on skipped ones with "step")
        after = params_of(model)
        trace.skipped.append(skipped)
        trace.update_norms.append(
            float(sum((after[n] - before[n]).double().pow(2).sum() for n in after)) ** 0.5
        )
        trace.window_scales.append(scaler.get_scale() if enabled else 1.0)
        trace.params.append(after)
    return trace


def default_loss_scale() -> float:
    """The scale a fresh GradScaler starts from (lesson 06)."""
    return float(torch.amp.GradScaler("cpu").get_scale())
