"""Lesson 06's explorer: accumulation steps, precision, clipping and scheduler placement against
the full-batch loop. `explorer_data` is the plain compute function tests call directly."""

from __future__ import annotations

from .._validate import one_of, positive_float, positive_int
from ..engine import CLIP_PLACEMENTS, SCHEDULER_STEPS, Recipe, run
from .dtypes import ACCUMULATIONS, accumulation_errors

CLIP_CHOICES = ("none", *CLIP_PLACEMENTS)
MAX_K = 8
STEPS = 8  # optimizer steps per run: enough to see warm-up and decay, small enough to be instant
MICRO_BATCH = 2


def _update_norms(trace) -> list[float]:
    before = trace.initial_params
    norms = []
    for after in trace.params:
        norms.append(float(sum((after[n] - before[n]).pow(2).sum() for n in after)) ** 0.5)
        before = after
    return norms


def explorer_data(
    k: int = 4,
    precision: str = "bfloat16",
    max_norm: float = 0.5,
    clip_at: str = "window",
    scheduler_step: str = "optimizer_step",
    *,
    lr: float = 0.1,
) -> dict:
    """One run of `STEPS` optimizer steps with warm-up + cosine, as the controls say, and the
    full-batch run (clip once, scheduler per optimizer step) it should match. Lesson 06."""
    from ..data import regression_data
    from ..models import mlp
    from .schedules import warmup_cosine

    k = positive_int("k", k)
    if k > MAX_K:
        raise ValueError(f"k must be at most {MAX_K}, got {k}")
    one_of("precision", precision, ACCUMULATIONS)
    max_norm = positive_float("max_norm", max_norm)
    one_of("clip_at", clip_at, CLIP_CHOICES)
    one_of("scheduler_step", scheduler_step, SCHEDULER_STEPS)
    window = MICRO_BATCH * k
    data = regression_data(n=STEPS * window, features=4, seed=0)
    model = mlp(features=4, hidden=8, depth=1, seed=0)
    sched = warmup_cosine(STEPS // 2, STEPS)
    clip = None if clip_at == "none" else max_norm
    recipe = Recipe(
        MICRO_BATCH,
        k,
        clip_norm=clip,
        clip_at="window" if clip_at == "none" else clip_at,
        scheduler_step=scheduler_step,
    )
    trace = run(recipe, model, data, lr=lr, scheduler=sched, record_grads=False)
    reference = run(
        Recipe(window, 1, clip_norm=clip), model, data, lr=lr, scheduler=sched, record_grads=False
    )
    names = tuple(dict.fromkeys((precision, "float32")))
    sweep = accumulation_errors([2**i for i in range(7)], names)
    return {
        "k": k,
        "max_norm": clip,
        "lr_max": lr,
        "update_norms": _update_norms(trace),
        "reference_update_norms": _update_norms(reference),
        "lrs": trace.lrs,
        "reference_lrs": reference.lrs,
        "param_gap": max(
            float((trace.params[-1][n] - reference.params[-1][n]).abs().max())
            for n in trace.params[-1]
        ),
        "precision": sweep,
        "accumulation_error": _error_at(k, precision),
    }


def _error_at(k: int, precision: str) -> float:
    from .dtypes import accumulate, micro_batch_grads

    grads = micro_batch_grads(k)
    exact = grads.mean(dim=0)
    return float((accumulate(grads, precision) - exact).norm() / exact.norm())


def amp_explorer():
    """Lesson 06: sliders for k and the clipping threshold, menus for precision, clip placement and
    scheduler stepping → update norms, learning rates and accumulation error."""
    import ipywidgets as W

    from ..explorer import Explorer, int_slider
    from .plots import plot_explorer, update_explorer

    style = {"description_width": "initial"}
    controls = {
        "k": int_slider("accumulation steps k", 4, 1, MAX_K),
        "precision": W.Dropdown(
            options=list(ACCUMULATIONS),
            value="bfloat16",
            description="precision (right plot)",
            style=style,
        ),
        # min > 0: a zero threshold is not a valid clip_grad_norm_ argument
        "max_norm": W.FloatSlider(
            value=0.5,
            min=0.05,
            max=2.0,
            step=0.05,
            description="max_norm",
            continuous_update=False,
            style=style,
        ),
        "clip_at": W.Dropdown(
            options=list(CLIP_CHOICES), value="window", description="clip", style=style
        ),
        "scheduler_step": W.Dropdown(
            options=list(SCHEDULER_STEPS),
            value="optimizer_step",
            description="scheduler.step() per",
            style=style,
        ),
    }
    return Explorer(controls, explorer_data, plot_explorer, update_explorer)


__all__ = ["amp_explorer", "explorer_data"]
