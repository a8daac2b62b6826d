"""Lesson 11's explorer: framework (or exact variant) × k × data → per-step gradient error and
logged-loss error.

Running a framework costs 10–300 ms (the Trainer's start-up collects garbage), too slow for a
control change, so every (framework, data, k) the controls can reach is run ONCE, when the explorer
is built; a change only looks up the cached checks and moves the figure's artists.
"""

from __future__ import annotations

import ipywidgets as W

from .. import _validate
from ..explorer import Explorer, explorer_example, int_slider
from . import shapes
from .hooks import FrameworkRun
from .measure import EXACT, StepCheck, check_run, saw_label
from .plots import plot_step_explorer, step_explorer_caption, update_step_explorer
from .problem import DATASETS, make_problem
from .runs import ALL, FRAMEWORKS, run_framework

KS = (2, 3, 4, 5)  # 10 micro-batches: k = 2 and 5 fill every window, 3 and 4 leave a short one
# the documented loops and the lesson's exact variants of three of them, to compare at every k
EXPLORED = (*FRAMEWORKS, "accelerate_global", "lightning_exact", "deepspeed_exact")


def framework_grid(
    names=EXPLORED,
    ks=KS,
    data=DATASETS,
    *,
    runs: dict[str, dict[str, FrameworkRun]] | None = None,
    progress: bool = True,
) -> dict[tuple[str, str, int], list[StepCheck]]:
    """{(name, data, k): per-step checks} for every combination; runs already made (as
    `run_all` returns them) are reused instead of run again. Lesson 11."""
    from tqdm.auto import tqdm

    shapes.grid_request(names, ks, data, runs)
    _validate.flag("progress", progress)
    done = {
        (n, d, r.problem.k): r for d, by_name in (runs or {}).items() for n, r in by_name.items()
    }
    jobs = [(n, d, k) for n in names for d in data for k in ks]
    grid = {}
    for n, d, k in tqdm(jobs, desc="framework × data × k", disable=not progress, leave=False):
        run = done.get((n, d, k)) or run_framework(n, d, k)
        grid[(n, d, k)] = check_run(run)
    return grid


def explore_frameworks(grid: dict, framework: str, data: str, k: int) -> dict:
    """What the explorer draws for one setting, looked up in `framework_grid(...)`'s cache."""
    _validate.mapping("grid", grid, keys=tuple)
    key = (framework, data, k)
    if key not in grid:
        raise ValueError(f"(framework, data, k) = {key!r} is not in the grid")
    checks = grid[key]
    if not isinstance(checks, list) or not all(isinstance(c, StepCheck) for c in checks):
        raise ValueError(
            f"grid[{key!r}] must be the list of StepChecks framework_grid(...) makes, got "
            f"{type(checks).__name__} {checks!r:.60}"
        )
    return {
        "framework": framework,
        "label": ALL[framework].label,
        "data": data,
        "k": k,
        "grad_error": [c.grad_error for c in checks],
        "loss_error": [c.loss_error for c in checks],
        "windows": [len(c.window) for c in checks],
        "expected_steps": len(make_problem(data, k).windows()),
        "divided_by": saw_label(checks),  # one rule where equal micro-batches make two coincide
        # float64 round-off, or float32's for DeepSpeed: the dashed line of the figure
        "tolerance": checks[0].tolerance if checks else EXACT,
    }


@explorer_example(lambda: {"grid": framework_grid(progress=False)})  # lesson 11's cell before it
def framework_explorer(grid: dict | None = None) -> Explorer:
    """Build lesson 11's explorer over `grid` (default: every framework, data set and k in KS,
    run now — a few seconds, with a progress bar)."""
    grid = grid if grid is not None else framework_grid()
    if not _validate.mapping("grid", grid, keys=tuple):
        raise ValueError(f"grid must be a non-empty dict from framework_grid(), got {grid!r}")
    names = list(dict.fromkeys(n for n, _, _ in grid))
    datas = list(dict.fromkeys(d for _, d, _ in grid))
    ks = sorted({k for _, _, k in grid})
    missing = [(n, d, k) for n in names for d in datas for k in ks if (n, d, k) not in grid]
    if missing or ks != list(range(ks[0], ks[-1] + 1)):
        # a slider over k must reach only cached settings: no gap, no hole
        raise ValueError(
            f"grid must hold every framework × data × k over consecutive k; "
            f"missing {missing[:3]}, k = {ks}"
        )
    framework = W.Dropdown(
        options=[(ALL[n].label, n) for n in names], value=names[0], description="framework"
    )
    data = W.Dropdown(options=datas, value=datas[0], description="data")
    k = int_slider("accumulation steps k", ks[-1] if 4 not in ks else 4, ks[0], ks[-1])
    # as many step slots as the smallest k can make, and no more: every tick label costs render time
    max_steps = max(len(checks) for checks in grid.values())

    def compute(framework: str, data: str, k: int) -> dict:
        return explore_frameworks(grid, framework, data, k)

    def plot(data: dict):
        return plot_step_explorer(data, max_steps=max_steps)

    controls = {"framework": framework, "data": data, "k": k}
    return Explorer(controls, compute, plot, update_step_explorer, caption=step_explorer_caption)
