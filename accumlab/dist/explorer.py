"""Lesson 07's explorer: ranks, k, micro-batch and no_sync → all-reduce count, the time those
all-reduces take when each is timed alone, and the measured step time.

Launching processes on every slider move would take seconds, so the explorer reads the sweep that
`al.dist.sync_experiments(...)` already measured (or a recorded GPU sweep); `sweep_view` is the plain
function behind it, callable without any widget.
"""

from __future__ import annotations

from .._validate import flag
from ..explorer import Explorer, explorer_example
from . import shapes


def sweep_grid(rows: list[dict]) -> dict:
    """The values the sweep covers: {"ranks": [...], "k": [...], "micro_batch": [...]}."""
    shapes.rows("rows", rows)
    return {key: sorted({r[key] for r in rows}) for key in ("ranks", "k", "micro_batch")}


def sweep_view(
    rows: list[dict], ranks: int, k: int, micro_batch: int, no_sync: bool, *, source: str = ""
) -> dict:
    """The measured row for one setting, plus both curves over k for the same ranks/micro-batch."""
    flag("no_sync", no_sync)
    grid = sweep_grid(rows)
    for name, value in (("ranks", ranks), ("k", k), ("micro_batch", micro_batch)):
        if value not in grid[name]:
            raise ValueError(
                f"{name} must be one of the measured values {grid[name]}, got {value!r}"
            )
    series = {}
    for mode in (False, True):
        pts = sorted(
            (
                r
                for r in rows
                if r["ranks"] == ranks and r["micro_batch"] == micro_batch and r["no_sync"] == mode
            ),
            key=lambda r: r["k"],
        )
        series[mode] = {
            key: [r[key] for r in pts]
            for key in ("k", "allreduce_calls", "allreduce_bytes", "step_time_s")
        }
        # one rank: DDP's hook still runs on its 1-rank group, but no byte leaves the process
        series[mode]["bytes_between_ranks"] = [
            r["allreduce_bytes"] if ranks > 1 else 0 for r in pts
        ]
        # the step's all-reduces, each costing what one all-reduce of every gradient took when
        # timed on its own (nothing to overlap with): the communication part of the step time
        series[mode]["allreduce_time_s"] = [
            r["allreduce_calls"] * r["allreduce_alone_s"] for r in pts
        ]
    selected = next(
        r
        for r in rows
        if r["ranks"] == ranks
        and r["k"] == k
        and r["micro_batch"] == micro_batch
        and r["no_sync"] == bool(no_sync)
    )
    # at k = 1 both modes run the same code: their difference is the timing noise of this sweep
    # (the smallest k both modes measured; 0 when they share none)
    shared = sorted(set(series[False]["k"]) & set(series[True]["k"]))
    k1 = [
        series[m]["step_time_s"][series[m]["k"].index(shared[0])] if shared else 0.0
        for m in (False, True)
    ]
    return {
        "ranks": ranks,
        "micro_batch": micro_batch,
        "selected": selected,
        "series": series,
        "source": source,
        "noise_s": abs(k1[0] - k1[1]),
    }


def _example() -> dict:
    from .lesson import sync_experiments

    # lesson 07's sweep, measured here: 2 ranks launched once (a few seconds)
    return {"rows": sync_experiments(2, parts=("sweep",), progress=False)["sweep"]}


@explorer_example(_example)
def sync_explorer(rows: list[dict], *, source: str = "", plan: dict | None = None) -> Explorer:
    """Lesson 07: an Explorer over a measured sweep. Sliders only offer measured values. With the
    `plan` the rows were measured under (`summary["plan"]`), the title says what the times measure
    (gloo on CUDA tensors of ranks sharing one GPU times copies to host memory, not NCCL)."""
    import ipywidgets as W

    from .. import _validate
    from .backend import timing_note

    if plan is not None:
        _validate.result("plan", plan, shapes.PLAN, "a plan's as_dict() (summary['plan'])")
        source = f"{source} ({timing_note(plan)})"

    from ..explorer import int_slider, selection_slider
    from .plots import plot_sync_explorer, update_sync_explorer

    grid = sweep_grid(rows)
    if grid["ranks"] != list(range(grid["ranks"][0], grid["ranks"][-1] + 1)):
        raise ValueError(f"the sweep must cover consecutive rank counts, got {grid['ranks']}")
    controls = {
        "ranks": int_slider("ranks", grid["ranks"][-1], grid["ranks"][0], grid["ranks"][-1]),
        "k": selection_slider("micro-steps k", grid["k"], grid["k"][len(grid["k"]) // 2]),
        "micro_batch": selection_slider("micro-batch", grid["micro_batch"], grid["micro_batch"][0]),
        "no_sync": W.Checkbox(value=True, description="no_sync on k−1 micro-steps"),
    }

    def compute(ranks, k, micro_batch, no_sync):
        return sweep_view(rows, ranks, k, micro_batch, no_sync, source=source)

    return Explorer(controls, compute, plot_sync_explorer, update_sync_explorer)
