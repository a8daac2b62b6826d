"""What to log for an optimizer step, and on which axis: the same run at several k, logged several
ways, and what a logger that insists on increasing steps does with a mixed axis. Lesson 10 (builds
on lesson 03's `al.scaling.logged_losses`).
"""

from __future__ import annotations

from .._validate import (
    MAX_STEPS,
    fits_in_memory,
    one_of,
    positive_float,
    positive_int,
    positive_ints,
)
from ..data import regression_data
from ..engine import Recipe, Trace, run
from ..models import mlp
from ..scaling.weights import logged_losses
from .counters import Schedule

# What a training log might print for one optimizer step (lesson 10):
#   window          — item-weighted mean loss over the window: what the full batch would report
#   sum_of_scaled   — Σ of the ÷k-scaled micro-losses backward saw
#   last_scaled     — `loss.item()` of the last micro-batch, after `loss = loss / k`
#   sum_of_unscaled — Σ of the micro-batch mean losses, never divided
LOGGED = ("window", "sum_of_scaled", "last_scaled", "sum_of_unscaled")


def logged_curves(trace: Trace) -> dict[str, list[float]]:
    """Per optimizer step, each number of LOGGED (lesson 03's `logged_losses` plus the undivided
    sum). Lesson 10."""
    if not isinstance(trace, Trace):
        raise ValueError(f"trace must be an accumlab.Trace, got {type(trace).__name__}")
    base = logged_losses(trace)
    unscaled: dict[int, float] = {}
    backward = [e for e in trace.events if e.kind == "backward"]
    for event, loss in zip(backward, trace.micro_losses, strict=True):
        unscaled[event.window] = unscaled.get(event.window, 0.0) + loss
    return {
        "window": base["window"],
        "sum_of_scaled": base["sum_of_scaled"],
        "last_scaled": base["last_scaled"],
        "sum_of_unscaled": [unscaled[w] for w in sorted(unscaled)],
    }


def logging_runs(
    ks=(1, 4, 16),
    window_samples: int = 64,
    steps: int = 12,
    *,
    lr: float = 0.05,
    seed: int = 0,
) -> dict[int, Trace]:
    """The same training — `steps` SGD steps of `window_samples` samples each — at every k in
    `ks`, with micro-batches of window_samples / k: float64, so the runs agree to round-off and
    only the bookkeeping differs. Lesson 10."""
    window_samples = positive_int("window_samples", window_samples)
    steps = positive_int("steps", steps)
    lr = positive_float("lr", lr)
    ks = positive_ints("ks", ks)
    if steps * max(ks) > MAX_STEPS:
        raise ValueError(
            f"steps × k = {steps} × {max(ks)} micro-steps for the largest k; at most {MAX_STEPS:,}"
        )
    fits_in_memory(
        f"window_samples × steps = {window_samples} × {steps} samples", window_samples * steps * 48
    )
    for k in ks:
        if window_samples % k:
            raise ValueError(f"k must divide window_samples={window_samples}, got {k}")
    data = regression_data(n=window_samples * steps, features=4, seed=seed)
    model = mlp(4, 8, depth=1, seed=seed)
    return {k: run(Recipe(window_samples // k, k), model, data, optimizer="sgd", lr=lr) for k in ks}


def micro_step_axis(n_steps: int, k: int) -> list[int]:
    """x values of per-step logs drawn against micro-steps: step s ends at micro-step (s + 1)·k."""
    k = positive_int("k", k)
    n_steps = positive_int("n_steps", n_steps, minimum=0, maximum=MAX_STEPS, why="one x value each")
    return [(s + 1) * k for s in range(n_steps)]


AXES = ("micro_step", "optimizer_step")


def mixed_axis_log(schedule: Schedule, loss_axis: str = "micro_step") -> dict[str, tuple[int, int]]:
    """The learning rate logged after every optimizer step with step = optimizer steps taken, and
    the loss logged either at every micro-step with step = micro-steps taken (`loss_axis=
    "micro_step"`) or once per optimizer step beside the learning rate. The calls go, in time
    order, to a logger that drops a call whose step is below the largest step seen so far (the
    rule W&B's warning "Step must only increase in log calls" states). Returns
    {series: (kept, dropped)}. Lesson 10."""
    if not isinstance(schedule, Schedule):
        raise ValueError(f"schedule must be a Schedule, got {type(schedule).__name__}")
    one_of("loss_axis", loss_axis, AXES)
    calls = []
    ends = schedule.ends_window()
    steps = 0
    for g in range(schedule.micro_steps):
        if loss_axis == "micro_step":
            calls.append(("loss", g + 1))
        if ends[g]:
            steps += 1
            if loss_axis == "optimizer_step":
                calls.append(("loss", steps))
            calls.append(("lr", steps))
    kept = {"loss": 0, "lr": 0}
    dropped = {"loss": 0, "lr": 0}
    largest = -1
    for series, step in calls:
        if step < largest:
            dropped[series] += 1
        else:
            kept[series] += 1
            largest = step
    return {s: (kept[s], dropped[s]) for s in kept}
