"""Lesson 13's explorer: micro-batch size b and accumulation steps k → the effective batch B = b·k,
the steps and samples the sweep measured to reach the target at that B, the forward-backward
passes it costs (steps × k) next to what every other split of the same B would cost, and the noise
scale the two-batch estimator reads from that very accumulation loop (B_small = b, B_big = k·b),
next to the exact value.

`explore_batch` is the plain compute function tests call; a change looks the sweep up and runs one
vectorised two-batch estimate (cached), then moves the artists of a figure built once.
"""

from __future__ import annotations

from functools import lru_cache

from .. import _validate
from .._validate import positive_float, positive_int
from ..explorer import Explorer, explorer_example, selection_slider
from .noise import Problem, check_problem
from .two_batch import two_batch_noise

SIZES = (1, 2, 4, 8, 16, 32)  # b and k: every product is a power of 2 up to 1024, as in the sweep
SAMPLES_PER_ESTIMATE = 1 << 15  # windows = this ÷ (b·k): the same data budget at every setting


@lru_cache(maxsize=128)
def _estimate(problem: Problem, excess: float, b: int, k: int) -> float | None:
    windows = max(16, SAMPLES_PER_ESTIMATE // (b * k))
    # draws of their own for every (b, k): one seed for all would repeat one draw's error
    est = two_batch_noise(problem, excess, micro_batch_size=b, accumulation_steps=k,
                          windows=windows, seed=(b * 1024 + k) % 2**31)  # fmt: skip
    return est["b_simple"]


def explore_batch(
    sweep: dict,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    problem: Problem | None = None,
) -> dict:
    """One setting of the explorer: B = b·k looked up in `batch_size_sweep(...)`'s result, the
    passes it costs, and the two-batch noise scale measured at the sweep's target loss."""
    from .shapes import SWEEP

    _validate.result("sweep", sweep, {**SWEEP, "target_excess": float},
                     "what al.scale.batch_size_sweep(...) returns")  # fmt: skip
    problem = Problem() if problem is None else check_problem(problem)
    b = positive_int("micro_batch_size", micro_batch_size)
    k = positive_int("accumulation_steps", accumulation_steps)
    big = b * k
    if big not in sweep["batch_sizes"]:
        raise ValueError(
            f"micro_batch_size × accumulation_steps = {b} × {k} = {big} must be a batch size the "
            f"sweep measured, one of {sweep['batch_sizes']}"
        )
    i = sweep["batch_sizes"].index(big)
    excess = positive_float("sweep['target_excess']", sweep["target_excess"])
    steps = sweep["steps"][i]
    # every split of this B the sliders offer: the same steps and samples, different passes
    splits = sorted({m for m in SIZES if big % m == 0 and big // m in SIZES} | {b})
    return {
        "micro_batch_size": b,
        "accumulation_steps": k,
        "batch": big,
        "steps": steps,
        "samples": sweep["samples"][i],
        "passes": steps * k,  # forward-backward passes, one after another on one device
        "split_sizes": splits,
        "split_passes": [steps * big / m for m in splits],
        "measured_b_simple": _estimate(problem, excess, b, k) if k > 1 else None,
        "estimate_samples": max(16, SAMPLES_PER_ESTIMATE // big) * big if k > 1 else 0,
        "exact_b_simple": problem.b_simple(excess),
    }


def _example() -> dict:
    from .batch_sweep import batch_size_sweep

    return {"sweep": batch_size_sweep()}  # as lesson 13 builds it


@explorer_example(_example)
def batch_explorer(sweep: dict, *, problem: Problem | None = None) -> Explorer:
    """Lesson 13: sliders for the micro-batch size b and the accumulation steps k over a
    `batch_size_sweep(...)` result; the figure marks B = b·k and the measured noise scale, the
    caption above it gives that scale's value."""
    from .batch_plots import batch_explorer_caption, plot_batch_explorer, update_batch_explorer

    explore_batch(sweep, 8, 4, problem=problem)  # checks sweep and problem before any widget
    controls = {
        "micro_batch_size": selection_slider("micro-batch size b", SIZES, 8),
        "accumulation_steps": selection_slider("accumulation steps k", SIZES, 4),
    }

    def compute(micro_batch_size: int, accumulation_steps: int) -> dict:
        return explore_batch(sweep, micro_batch_size, accumulation_steps, problem=problem)

    def plot(data: dict):
        return plot_batch_explorer(sweep, data)

    return Explorer(controls, compute, plot, update_batch_explorer, caption=batch_explorer_caption)
