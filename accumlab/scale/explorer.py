"""Lesson 12's explorer: micro-batches per step, pipeline stages and schedule → the pipeline's
timeline and bubble, and the accumulation error at k = m. `explorer_data` is the plain compute
function tests call directly; the figure is built once and its artists are moved on a change."""

from __future__ import annotations

import ipywidgets as W

from .._validate import one_of, positive_float, positive_int
from ..explorer import Explorer, explorer_example, int_slider, selection_slider
from .schedule import SCHEDULES, bubble_fraction, in_flight, replay, schedule_order

MAX_STAGES = 8
MAX_MICRO_BATCHES = 64  # S = 8 needs m = 64 for a bubble under 10 % (lesson 12, section 2)
SLOW_STAGE = (1.0, 1.5, 2.0, 3.0, 4.0)  # the last stage's pass times, in units of the others'


def explorer_data(
    micro_batches: int = 4, stages: int = 2, schedule: str = "GPipe", slow_stage: float = 1.0
) -> dict:
    """One pipeline step of `micro_batches` micro-batches through `stages` stages, the last stage's
    forward and backward `slow_stage` times as long as the others' (t_F = 1, t_B = 2). Lesson 12."""
    m = positive_int("micro_batches", micro_batches)
    s = positive_int("stages", stages)
    one_of("schedule", schedule, SCHEDULES)
    slow = positive_float("slow_stage", slow_stage)
    if m > MAX_MICRO_BATCHES or s > MAX_STAGES:
        raise ValueError(
            f"micro_batches must be at most {MAX_MICRO_BATCHES} and stages at most {MAX_STAGES}, "
            f"got {m} and {s}"
        )
    out = {
        "schedule": schedule,
        "stages": s,
        "micro_batches": m,
        "slow_stage": slow,
        "formula": bubble_fraction(s, m),
        "formula_curve": [bubble_fraction(s, j) for j in range(1, MAX_MICRO_BATCHES + 1)],
        "refused": None,
        "spans": None,
        "makespan": 1.0,
        "bubble": None,
        "in_flight": None,
    }
    try:
        orders = schedule_order(schedule, s, m)
    except ValueError:
        out["refused"] = f"torch's Schedule1F1B refuses m = {m} < S = {s}"
        return out
    # only the last stage is slower: with S = 1 it is the only stage, and nothing waits on it
    rep = replay(
        orders,
        t_forward=[1.0] * (s - 1) + [slow],
        t_backward=[2.0] * (s - 1) + [2.0 * slow],
    )
    out.update(
        spans=rep["spans"],
        makespan=rep["makespan"],
        bubble=rep["bubble"][0],
        in_flight=max(in_flight(o) for o in orders),
    )
    return out


def _example() -> dict:
    from .accumulator import accumulator_errors

    return {"errors": accumulator_errors([2**i for i in range(9)])}  # as lesson 12 builds it


@explorer_example(_example)
def scale_explorer(errors: dict | None = None) -> Explorer:
    """Lesson 12: sliders for micro-batches m and stages S, a menu for the schedule. `errors` is an
    `al.scale.accumulator_errors(...)` result to mark k = m on (computed once, in the lesson)."""
    from .plots import plot_scale_explorer, update_scale_explorer

    if errors is not None and not (
        isinstance(errors, dict) and {"ks", "errors"} <= set(errors) and errors["errors"]
    ):
        raise ValueError(
            "errors must be the dict al.scale.accumulator_errors(...) returns, got "
            f"{type(errors).__name__}"
        )
    controls = {
        "micro_batches": int_slider("micro-batches per step m", 4, 1, MAX_MICRO_BATCHES),
        "stages": int_slider("pipeline stages S", 2, 1, MAX_STAGES),
        "schedule": W.Dropdown(options=list(SCHEDULES), value="GPipe", description="schedule"),
        "slow_stage": selection_slider("last stage's pass time ×", SLOW_STAGE, 1.0),
    }

    def plot(data: dict):
        return plot_scale_explorer(data, errors=errors)

    return Explorer(controls, explorer_data, plot, update_scale_explorer)
