"""Learning-rate schedules under accumulation: a scheduler counts calls to `.step()`, so it must be
called once per optimizer step; once per micro-batch runs the schedule k times faster (lesson 06).
"""

from __future__ import annotations

import math

import torch

from .. import _validate
from .._validate import one_of, positive_int
from ..engine import SCHEDULER_STEPS, Recipe, run


def warmup_cosine(warmup_steps: int, total_steps: int, *, min_ratio: float = 0.0):
    """A factory `optimizer -> LambdaLR`: linear warm-up over `warmup_steps` calls, then cosine
    decay to `min_ratio` × lr at `total_steps` calls (and flat after). Lesson 06.

    Both lengths count scheduler calls, which is optimizer steps only when the loop steps the
    scheduler once per optimizer step.
    """
    warmup_steps = positive_int("warmup_steps", warmup_steps)
    total_steps = positive_int("total_steps", total_steps)
    if total_steps <= warmup_steps:
        raise ValueError(f"total_steps must exceed warmup_steps={warmup_steps}, got {total_steps}")
    if not 0.0 <= _validate.finite_float("min_ratio", min_ratio) <= 1.0:
        raise ValueError(f"min_ratio must be in [0, 1], got {min_ratio!r}")

    def factor(calls: int) -> float:
        if calls < warmup_steps:
            return (calls + 1) / warmup_steps  # the step after `calls` calls uses this fraction
        t = min(1.0, (calls - warmup_steps) / (total_steps - warmup_steps))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * t))

    def build(optimizer):
        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    return build


def schedule_curves(
    accumulation_steps: int,
    *,
    optimizer_steps: int = 40,
    warmup_steps: int = 8,
    lr: float = 0.1,
    placements: tuple[str, ...] = SCHEDULER_STEPS,
) -> dict:
    """The learning rate each optimizer step used, per scheduler placement, from real `al.run`
    loops over a tiny problem. Lesson 06.

    Returns {"k", "warmup_steps", "lr", "lrs": {placement: [lr per optimizer step]},
    "warmup_end": {placement: first optimizer step that used the full lr}}.
    """
    from ..data import regression_data
    from ..models import ScalarModel

    k = positive_int("accumulation_steps", accumulation_steps)
    optimizer_steps = positive_int("optimizer_steps", optimizer_steps)
    if optimizer_steps * k > 2**16:  # one sample per micro-batch of a scalar model: a demonstration
        raise ValueError(
            f"optimizer_steps × accumulation_steps must be at most {2**16}, got {optimizer_steps * k}"
        )
    data = regression_data(n=optimizer_steps * k, features=1, seed=0)
    model = ScalarModel(1.0)
    placements = _validate.sequence("placements", placements)
    for i, placement in enumerate(placements):
        one_of(f"placements[{i}]", placement, SCHEDULER_STEPS)
    sched = warmup_cosine(warmup_steps, optimizer_steps)
    out = {"k": k, "warmup_steps": warmup_steps, "lr": lr, "lrs": {}, "warmup_end": {}}
    for placement in placements:
        recipe = Recipe(1, k, scheduler_step=placement)
        trace = run(recipe, model, data, lr=lr, scheduler=sched, record_grads=False)
        out["lrs"][placement] = trace.lrs
        out["warmup_end"][placement] = next(
            (i for i, v in enumerate(trace.lrs) if math.isclose(v, lr)), None
        )
    return out


# The real schedulers a learner uses, built for `optimizer_steps` optimizer steps
REAL_SCHEDULERS = (
    "transformers get_cosine_schedule_with_warmup",
    "torch CosineAnnealingLR",
    "torch OneCycleLR",
    "transformers get_linear_schedule_with_warmup",  # the Trainer's default lr_scheduler_type
)


def _real_scheduler(name: str, optimizer, steps: int, warmup: int, lr: float):
    from torch.optim.lr_scheduler import CosineAnnealingLR, OneCycleLR

    if name == REAL_SCHEDULERS[0]:
        from transformers import get_cosine_schedule_with_warmup

        return get_cosine_schedule_with_warmup(optimizer, warmup, steps)
    if name == REAL_SCHEDULERS[3]:
        from transformers import get_linear_schedule_with_warmup

        return get_linear_schedule_with_warmup(optimizer, warmup, steps)
    if name == REAL_SCHEDULERS[1]:
        return CosineAnnealingLR(optimizer, T_max=steps)
    return OneCycleLR(optimizer, max_lr=lr, total_steps=steps)


def real_schedules(
    accumulation_steps: int,
    *,
    optimizer_steps: int = 40,
    warmup_steps: int = 8,
    lr: float = 0.1,
    schedulers: tuple[str, ...] = REAL_SCHEDULERS,
) -> dict:
    """The learning rate each optimizer step uses with real schedulers (Transformers' cosine and
    linear with warm-up, torch's CosineAnnealingLR and OneCycleLR), all built for `optimizer_steps` optimizer
    steps, when `scheduler.step()` is called once per optimizer step and once per micro-batch.
    Lesson 06.

    Returns {"k", "optimizer_steps", "lr", "versions": {"torch", "transformers"}, "lrs":
    {name: {placement: [lr per optimizer step, until the run ended]}}, "errors": {name:
    {placement: the error that ended the run early, or None}}}.
    """
    import warnings

    import transformers

    k = positive_int("accumulation_steps", accumulation_steps)
    optimizer_steps = positive_int("optimizer_steps", optimizer_steps, minimum=2)
    if optimizer_steps * k > 2**16:  # one scheduler call per micro-batch: a demonstration
        raise ValueError(
            f"optimizer_steps × accumulation_steps must be at most {2**16}, got {optimizer_steps * k}"
        )
    warmup_steps = positive_int("warmup_steps", warmup_steps, minimum=0)
    if warmup_steps >= optimizer_steps:
        raise ValueError(
            f"warmup_steps must be below optimizer_steps={optimizer_steps}, got {warmup_steps}"
        )
    lr = _validate.positive_float("lr", lr)
    schedulers = _validate.sequence("schedulers", schedulers)
    for i, name in enumerate(schedulers):
        one_of(f"schedulers[{i}]", name, REAL_SCHEDULERS)
    out = {
        "k": k,
        "optimizer_steps": optimizer_steps,
        "warmup_steps": warmup_steps,
        "lr": lr,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "lrs": {},
        "errors": {},
    }
    for name in schedulers:
        out["lrs"][name], out["errors"][name] = {}, {}
        for placement in SCHEDULER_STEPS:
            param = torch.zeros(1, requires_grad=True)
            opt = torch.optim.SGD([param], lr=lr)
            sched = _real_scheduler(name, opt, optimizer_steps, warmup_steps, lr)
            lrs, error = [], None
            try:
                with warnings.catch_warnings():
                    # per micro-batch, scheduler.step() comes before the first optimizer.step()
                    warnings.filterwarnings("ignore", message=".*lr_scheduler.step\\(\\)")
                    for _ in range(optimizer_steps):
                        for i in range(k):
                            last = i == k - 1
                            if last:  # the optimizer step uses the lr set now
                                lrs.append(float(opt.param_groups[0]["lr"]))
                                opt.step()
                            if last or placement == "micro_step":
                                sched.step()
            except ValueError as err:  # OneCycleLR refuses to step past total_steps
                error = f"{type(err).__name__}: {err}"
            out["lrs"][name][placement] = lrs
            out["errors"][name][placement] = error
    return out
