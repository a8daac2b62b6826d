"""The accumulation engine: a `Recipe` says how a loop accumulates, `run` executes it, a `Trace`
records what happened. Buggy loops are Recipes too, so "right vs wrong" is one field (lesson 02+).
"""

from __future__ import annotations

import copy
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from . import _validate
from ._validate import one_of, positive_float, positive_int
from .data import Data
from .losses import Loss
from .optim import make_optimizer
from .run_inputs import check_run, check_scheduler, forward

# How each micro-batch's loss is scaled before backward:
#   mean   — micro-batch mean ÷ number of micro-batches in the window (the usual `loss / k`)
#   global — sum of item losses ÷ items in the whole window (exact with unequal micro-batches)
#   sum    — sum of item losses, not divided (gradient of the summed loss)
#   none   — micro-batch mean, not divided (the classic bug: k times the gradient)
NORMALIZATIONS = ("mean", "global", "sum", "none")
# What a last window holding fewer than k micro-batches is divided by (for "mean"), or whether it
# is used at all: divide_by_k under-weights it, divide_by_actual averages over what is there.
LAST_WINDOW_POLICIES = ("divide_by_k", "divide_by_actual", "drop")
# Where gradients are zeroed: once per window (correct) or before every micro-step (only the
# last micro-batch of each window survives to the optimizer step).
ZERO_GRAD_PLACEMENTS = ("window", "every_micro_step")
# Where gradients are clipped to `clip_norm`: once, on the accumulated window gradient (what the
# full batch would clip), or after every backward on the running .grad (the common mistake).
CLIP_PLACEMENTS = ("window", "micro_step")
# When the learning-rate scheduler steps: once per optimizer step (correct) or after every
# micro-batch (the schedule then runs k times faster than it was written for).
SCHEDULER_STEPS = ("optimizer_step", "micro_step")


@dataclass(frozen=True)
class Recipe:
    """How a training loop accumulates. Introduced in lesson 02; lesson 03 adds the policies,
    lesson 06 gradient clipping (`clip_norm`, `clip_at`) and when the scheduler steps."""

    micro_batch_size: int
    accumulation_steps: int = 1
    normalization: str = "mean"
    last_window: str = "divide_by_actual"
    zero_grad: str = "window"
    clip_norm: float | None = None  # max gradient norm; None: no clipping (lesson 06)
    clip_at: str = "window"
    scheduler_step: str = "optimizer_step"

    def __post_init__(self):
        positive_int("micro_batch_size", self.micro_batch_size)
        positive_int("accumulation_steps", self.accumulation_steps)
        one_of("normalization", self.normalization, NORMALIZATIONS)
        one_of("last_window", self.last_window, LAST_WINDOW_POLICIES)
        one_of("zero_grad", self.zero_grad, ZERO_GRAD_PLACEMENTS)
        if self.clip_norm is not None:
            positive_float("clip_norm", self.clip_norm)
        one_of("clip_at", self.clip_at, CLIP_PLACEMENTS)
        one_of("scheduler_step", self.scheduler_step, SCHEDULER_STEPS)

    @property
    def window_size(self) -> int:
        """Samples per optimizer step when every micro-batch is full."""
        return self.micro_batch_size * self.accumulation_steps

    def windows(self, data: Data) -> list[list[Data]]:
        """Split `data` into windows of up to k micro-batches, applying the last-window policy."""
        _validate.instance("data", data, Data, "an accumlab Data(x, y)")
        micro = data.micro_batches(self.micro_batch_size)
        k = self.accumulation_steps
        windows = [micro[i : i + k] for i in range(0, len(micro), k)]
        if self.last_window == "drop" and len(windows[-1]) < k:
            windows = windows[:-1]
        if not windows:
            # a loop that never steps would "train" without changing anything: say so
            raise ValueError(
                f"last_window='drop' drops every window: {len(data)} samples make {len(micro)} "
                f"micro-batch(es) of {self.micro_batch_size}, fewer than accumulation_steps={k}, "
                "so no optimizer step would ever run; lower accumulation_steps or use "
                "last_window='divide_by_actual'"
            )
        return windows

    def scale(self, loss_sum: torch.Tensor, count: int, window_len: int, window_count: int):
        """The loss backward is called on, for one micro-batch (the line that matters)."""
        if self.normalization == "sum":
            return loss_sum
        if self.normalization == "global":
            return loss_sum / window_count  # every item weighs 1/N over the window
        mean = loss_sum / count
        if self.normalization == "none":
            return mean  # not divided: the window's gradient is the SUM of k means
        divisor = self.accumulation_steps if self.last_window == "divide_by_k" else window_len
        return mean / divisor  # loss / k: the window's gradient is the MEAN of k means


@dataclass(frozen=True)
class Event:
    kind: str  # "zero", "backward", "clip", "step", "schedule"
    micro_step: int  # global micro-step index (0-based)
    window: int  # window index (0-based, counting across epochs)


@dataclass
class Trace:
    """What `run` observed. Lists are indexed by micro-step or by window (= optimizer step)."""

    recipe: Recipe
    model: nn.Module
    initial_params: dict[str, torch.Tensor]
    micro_losses: list[float] = field(default_factory=list)  # unscaled micro-batch mean
    scaled_losses: list[float] = field(default_factory=list)  # what backward was called on
    micro_counts: list[int] = field(default_factory=list)  # items per micro-batch
    grads: list[dict[str, torch.Tensor]] = field(default_factory=list)  # .grad after each backward
    window_grads: list[dict[str, torch.Tensor]] = field(default_factory=list)  # seen by optimizer
    window_losses: list[float] = field(default_factory=list)  # item-weighted mean over the window
    params: list[dict[str, torch.Tensor]] = field(default_factory=list)  # after each step
    events: list[Event] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)  # learning rate each optimizer step used
    clip_norms: list[float] = field(default_factory=list)  # norm before each clip (lesson 06)
    optimizer: torch.optim.Optimizer | None = None  # kept so its state can be inspected

    @property
    def steps(self) -> int:
        """Windows completed (optimizer steps, or would-be steps when optimizer=None)."""
        return len(self.window_losses)

    def count(self, kind: str) -> int:
        return sum(e.kind == kind for e in self.events)


def plain_copy(t: torch.Tensor) -> torch.Tensor:
    """A detached copy that is a plain torch.Tensor: a subclass's own `__torch_function__` (say,
    one whose `allclose` always answers True) does not follow the copy into later comparisons."""
    with torch._C.DisableTorchFunctionSubclass():
        return t.detach().as_subclass(torch.Tensor).clone()


def snapshot(tensors: dict[str, torch.Tensor | None], like: dict[str, torch.Tensor]):
    """Detached plain copies; a missing .grad (None) becomes zeros so snapshots stay comparable."""
    return {
        n: (plain_copy(t) if t is not None else torch.zeros_like(like[n]))
        for n, t in tensors.items()
    }


def grads_of(model: nn.Module) -> dict[str, torch.Tensor]:
    _validate.instance("model", model, nn.Module, "a torch.nn.Module")
    params = dict(model.named_parameters())
    return snapshot({n: p.grad for n, p in params.items()}, params)


def params_of(model: nn.Module) -> dict[str, torch.Tensor]:
    _validate.instance("model", model, nn.Module, "a torch.nn.Module")
    return {n: plain_copy(p) for n, p in model.named_parameters()}


# optimizers by name; their state per parameter: none, one momentum buffer, two Adam moments
def run(
    recipe: Recipe,
    model: nn.Module,
    data: Data,
    *,
    loss: str | Loss = "mse",
    optimizer: str | Callable | None = "sgd",
    lr: float = 0.01,
    epochs: int = 1,
    record_grads: bool = False,
    record_windows: bool = True,
    in_place: bool = False,
    scheduler: Callable | None = None,
) -> Trace:
    """Train `model` on `data` as `recipe` says; return a Trace. Introduced in lesson 02.

    The model is copied first (unless `in_place`), so several recipes can start from one model.
    `optimizer=None` accumulates and zeroes but never updates: gradients only.
    `record_grads=True` also keeps every `.grad` after every micro-step in `trace.grads` (lesson 02
    plots them); it is off by default because copying every gradient every micro-step costs time.
    `record_windows=False` skips the per-window copies of gradients and parameters
    (`trace.window_grads`, `trace.params`): a training run then costs what a hand loop costs.
    `scheduler` (lesson 06): a callable optimizer -> LR scheduler, stepped as `recipe.scheduler_step`
    says.
    """
    flags = {"record_grads": record_grads, "record_windows": record_windows, "in_place": in_place}
    windows, loss_fn = check_run(recipe, model, data, loss, optimizer, lr, epochs, scheduler, flags)
    model = model if in_place else copy.deepcopy(model)
    opt = make_optimizer(optimizer, model.parameters(), lr)
    if scheduler is not None and opt is None:
        raise ValueError("scheduler needs an optimizer to schedule, got optimizer=None")
    sched = check_scheduler(scheduler(opt)) if scheduler is not None else None
    trace = Trace(recipe=recipe, model=model, initial_params=params_of(model), optimizer=opt)
    params = dict(model.named_parameters())
    micro_step = 0
    w_index = 0
    for _ in range(epochs):
        for window in windows:
            counts = [loss_fn.count(mb.y) for mb in window]
            window_count = sum(counts)
            if recipe.normalization == "global" and window_count == 0:
                raise ValueError(f"window {w_index} holds zero real items; cannot normalise by 0")
            if recipe.normalization in ("mean", "none") and 0 in counts:
                # a micro-batch mean over zero tokens is 0/0: NaN gradients, silently
                raise ValueError(
                    f"micro-batch {counts.index(0)} of window {w_index} holds zero real items; "
                    "its mean is undefined (use normalization='global' or drop empty sequences)"
                )
            model.zero_grad(set_to_none=True)
            trace.events.append(Event("zero", micro_step, w_index))
            # losses stay on the device until the window ends: reading them per micro-step with
            # float() would make the CPU wait for the GPU at every micro-step
            raw, scaled_losses = [], []
            for i, (mb, count) in enumerate(zip(window, counts, strict=True)):
                if recipe.zero_grad == "every_micro_step" and i > 0:
                    model.zero_grad(set_to_none=True)  # the bug: erases earlier micro-batches
                    trace.events.append(Event("zero", micro_step, w_index))
                loss_sum, _ = loss_fn(
                    forward(model, mb, f"micro-batch {i} of window {w_index}"), mb.y
                )
                scaled = recipe.scale(loss_sum, count, len(window), window_count)
                if recipe.clip_norm is not None and recipe.clip_at == "micro_step":
                    _backward_clipped(scaled, model, recipe.clip_norm, trace)
                    trace.events.append(Event("clip", micro_step, w_index))
                else:
                    scaled.backward()
                trace.events.append(Event("backward", micro_step, w_index))
                raw.append(loss_sum.detach())  # detached: never keep the graph alive
                scaled_losses.append(scaled.detach())
                trace.micro_counts.append(count)
                if record_grads:
                    trace.grads.append(snapshot({n: p.grad for n, p in params.items()}, params))
                if (
                    sched is not None
                    and recipe.scheduler_step == "micro_step"
                    and i < len(window) - 1
                ):
                    # the bug: the scheduler advances once per micro-batch
                    _step_scheduler(sched, trace, micro_step, w_index)
                micro_step += 1
            if recipe.clip_norm is not None and recipe.clip_at == "window":
                # after accumulation: the norm of the whole window's gradient, as the full batch has
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip_norm)
                trace.clip_norms.append(float(norm))
                trace.events.append(Event("clip", micro_step - 1, w_index))
            raw_values = torch.stack(raw).tolist()  # one device sync per window
            trace.micro_losses += [v / max(c, 1) for v, c in zip(raw_values, counts, strict=True)]
            trace.scaled_losses += torch.stack(scaled_losses).tolist()
            if record_windows:
                trace.window_grads.append(grads_of(model))
            trace.window_losses.append(sum(raw_values) / max(window_count, 1))
            if opt is not None:
                trace.lrs.append(float(opt.param_groups[0]["lr"]))
                opt.step()
                trace.events.append(Event("step", micro_step - 1, w_index))
            if sched is not None:
                _step_scheduler(sched, trace, micro_step - 1, w_index)  # after optimizer.step()
            if record_windows:
                trace.params.append(params_of(model))
            w_index += 1
    return trace


def _backward_clipped(
    scaled: torch.Tensor, model: nn.Module, max_norm: float, trace: Trace
) -> None:
    """The loop people write when they clip "every micro-batch": backward, then clip_grad_norm_ on
    the RUNNING .grad. Each clip rescales everything accumulated so far, so the window's gradient
    ends with a norm ≤ max_norm, but earlier micro-batches are shrunk again by every later clip:
    the damage is to the direction (lesson 06; lesson 08's auditor models the same loop)."""
    scaled.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    trace.clip_norms.append(float(norm))


def _step_scheduler(sched, trace: Trace, micro_step: int, window: int) -> None:
    with warnings.catch_warnings():
        # stepping per micro-batch calls scheduler.step() before the first optimizer.step();
        # torch warns about that order, but here it is the bug the recipe models on purpose
        warnings.filterwarnings(
            "ignore", message=re.escape("Detected call of `lr_scheduler.step()`")
        )
        sched.step()
    trace.events.append(Event("schedule", micro_step, window))
