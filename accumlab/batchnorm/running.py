"""Running statistics under accumulation: k forwards per optimizer step decay the old statistics
as (1 − m)^k instead of (1 − m), and weight the micro-batches unequally. Lesson 04."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import MAX_STEPS, positive_float, positive_int
from ..data import Data
from ..engine import Recipe, forward, run
from .layers import _check_data, _module, batchnorm_layers, check_micro_batches


def check_momentum(name: str, value, *, below_one: bool = False, allow_none: bool = False):
    """A BatchNorm momentum: the weight of the NEW batch, in (0, 1] ((0, 1) with below_one; or
    None, PyTorch's cumulative average, with allow_none). Out of range, (1 − momentum)^k turns
    negative or grows, and every formula built on it is silently wrong."""
    if allow_none and value is None:
        return None
    bound = ("(0, 1)" if below_one else "(0, 1]") + (" or None" if allow_none else "")
    try:
        number = positive_float(name, value)
    except ValueError:
        number = None
    if number is None or number > 1 or (below_one and number == 1):
        raise ValueError(
            f"{name} must be a number in {bound} (the weight of the new batch in the running "
            f"statistics), got {value!r}"
        )
    return number


def with_momentum(model: nn.Module, momentum: float | None) -> nn.Module:
    """A copy of `model` whose BatchNorm layers use `momentum` (PyTorch's: weight of the NEW batch),
    or None: PyTorch's cumulative average, where update t weighs 1/t (every batch alike)."""
    _module(model)
    check_momentum("momentum", momentum, allow_none=True)
    model = copy.deepcopy(model)
    for bn in batchnorm_layers(model):
        bn.momentum = momentum
    return model


def matching_momentum(momentum: float, accumulation_steps: int) -> float:
    """The momentum m' with (1 − m')^k = 1 − m: k micro-batch updates then decay the old running
    statistics exactly as one full-batch update with `momentum` does. Lesson 04."""
    check_momentum("momentum", momentum, below_one=True)
    positive_int("accumulation_steps", accumulation_steps)
    return 1.0 - (1.0 - momentum) ** (1.0 / accumulation_steps)


def micro_batch_weights(momentum: float, accumulation_steps: int) -> list[float]:
    """Weight each micro-batch's mean gets in the running mean after one window of k updates: the
    last one m, the first m·(1 − m)^(k−1). A full-batch step gives every sample the same weight."""
    check_momentum("momentum", momentum)
    k = positive_int(
        "accumulation_steps", accumulation_steps, maximum=MAX_STEPS, why="a list of k weights"
    )
    return [momentum * (1 - momentum) ** (k - 1 - i) for i in range(k)]


def _running_after_step(model, data, micro_batch_size, accumulation_steps, fill: float):
    """First BatchNorm's (running_mean, running_var) after ONE optimizer step's forwards, starting
    from running statistics all equal to `fill`."""
    model = copy.deepcopy(model)
    for bn in batchnorm_layers(model):
        bn.running_mean.fill_(fill)
        bn.running_var.fill_(fill)
    recipe = Recipe(micro_batch_size, accumulation_steps)
    window = data[: recipe.window_size]
    # optimizer=None: forwards and backwards only; the running statistics change in the forwards
    trace = run(recipe, model, window, loss="cross_entropy", optimizer=None, record_grads=False)
    bn = batchnorm_layers(trace.model)[0]
    return bn.running_mean.clone(), bn.running_var.clone()


@one_thread()
def running_stats_step(
    model: nn.Module, data: Data, micro_batch_size: int, accumulation_steps: int
) -> dict:
    """The first BatchNorm's running statistics after one accumulated step (k micro-batch forwards)
    and after one full-batch step over the same samples, both from the model's own buffers.

    `old_weight_*` is how much of the previous running mean survives the step, measured by starting
    once from 0 and once from 1: the running mean is linear in its old value. Lesson 04.
    """
    _validate.model("model", model)
    _check_data(data)
    positive_int("accumulation_steps", accumulation_steps)
    bns = batchnorm_layers(model)
    if not bns:
        raise ValueError("model has no BatchNorm layer: it keeps no running statistics")
    window = len(data.first_window(micro_batch_size, accumulation_steps))
    check_micro_batches(model, data[:window], micro_batch_size)
    out = {"momentum": bns[0].momentum, "accumulation_steps": accumulation_steps}
    for name, (mb, k) in {
        "accumulated": (micro_batch_size, accumulation_steps),
        "full": (window, 1),
    }.items():
        mean0, var0 = _running_after_step(model, data, mb, k, 0.0)
        mean1, _ = _running_after_step(model, data, mb, k, 1.0)
        out[f"old_weight_{name}"] = mean1 - mean0  # one value per channel, all equal
        out[f"running_mean_{name}"] = mean0  # what the step added on top of the old value × weight
        out[f"running_var_{name}"] = var0
    return out


@one_thread()
def running_mean_trajectory(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    steps: int = 4,
    channel: int = 0,
) -> dict:
    """One channel's running mean after every forward, over `steps` optimizer steps, accumulating
    (k forwards per step) and full-batch (1 forward per step). Weights stay fixed: this isolates the
    statistics. The first BatchNorm's input is measured once; each forward's update is the layer's
    own rule applied to its micro-batch's mean (tests check it against forwards of the layer; lesson
    04 measures the buffers themselves with `running_stats_step`). Lesson 04's widget."""
    _validate.model("model", model)
    _check_data(data)
    positive_int("steps", steps)
    bns = batchnorm_layers(model)
    if not bns:
        raise ValueError("model has no BatchNorm layer: it keeps no running statistics")
    if bns[0].running_mean is None:
        raise ValueError(
            "model's first BatchNorm layer was built with track_running_stats=False: it keeps no "
            "running mean to follow"
        )
    window = len(data.first_window(micro_batch_size, accumulation_steps))
    # per step: k micro-batch forwards and one full-batch forward
    _validate.within_max_steps(
        f"steps × (k + 1) forwards = {steps} × {accumulation_steps + 1}",
        steps * (accumulation_steps + 1),
    )
    check_micro_batches(model, data[:window], micro_batch_size)
    positive_int("channel", channel, minimum=0, maximum=bns[0].num_features - 1)
    windows = len(data) // window
    # with the weights fixed, what reaches the first BatchNorm is the same in every forward: take
    # it once, then apply the layer's own update to each micro-batch's mean (a forward of the
    # model per micro-batch made the explorer slow at 30 steps of k = 16)
    inputs = _first_batchnorm_input(model, data.x[: windows * window])[:, channel]
    first = bns[0]
    out = {"steps": steps, "accumulation_steps": accumulation_steps, "channel": channel}
    for name, mb in (("accumulated", micro_batch_size), ("full", window)):
        means = [
            [float(c.mean()) for c in inputs[w * window : (w + 1) * window].split(mb)]
            for w in range(windows)
        ]
        value, tracked = float(first.running_mean[channel]), int(first.num_batches_tracked)
        xs, ys = [0.0], [value]
        for s in range(steps):
            chunk_means = means[s % windows]
            for j, mean in enumerate(chunk_means):
                tracked += 1  # BatchNorm's update: momentum, or 1/t for momentum=None
                factor = 1.0 / tracked if first.momentum is None else first.momentum
                value = (1 - factor) * value + factor * mean
                xs.append(s + (j + 1) / len(chunk_means))
                ys.append(value)
        out[name] = (xs, ys)
    out["target"] = float(inputs.mean())
    return out


def _first_batchnorm_input(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """What the first BatchNorm layer receives when `model` (a copy, in training mode) runs `x`."""
    model = copy.deepcopy(model).train()
    seen = []
    hook = batchnorm_layers(model)[0].register_forward_pre_hook(
        lambda _m, args: seen.append(args[0].detach())
    )
    try:
        with torch.no_grad():
            forward(model, x, "data")
    finally:
        hook.remove()
    return seen[0]


def old_weight_formula(momentum: float, updates: int) -> float:
    """(1 − momentum)^updates: what survives of the old running statistics. Lesson 04."""
    check_momentum("momentum", momentum)
    positive_int("updates", updates, minimum=0)
    return (1.0 - momentum) ** updates
