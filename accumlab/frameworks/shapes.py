"""What lesson 11's results look like, so its plots and explorer can say what is wrong with what
they are handed instead of failing inside with a KeyError or AttributeError."""

from __future__ import annotations

from .._validate import instance, nonempty, one_of, positive_ints, result, sequence
from .hooks import FrameworkRun
from .problem import DATASETS, MAX_K

EXPLORER = {
    "framework": str,
    "label": str,
    "data": str,
    "k": int,
    "grad_error": nonempty([float]),
    "loss_error": nonempty([float]),
    "windows": nonempty([int]),
    "expected_steps": int,
    "divided_by": str,
    "tolerance": float,
}


def table(name: str, value):
    from .table import FrameworkTable

    what = "the FrameworkTable al.frameworks.framework_table(...) returns"
    return instance(name, value, FrameworkTable, what)


def explorer(name: str, value) -> dict:
    return result(name, value, EXPLORER, "what al.frameworks.explore_frameworks(...) returns")


def grid_request(names, ks, data, runs) -> None:
    """framework_grid's arguments: names and data sets known, k in the problems' range, runs as
    `run_all` returns them."""
    from .runs import ALL

    for i, n in enumerate(sequence("names", names)):
        one_of(f"names[{i}]", n, ALL)
    positive_ints("ks", ks, maximum=MAX_K, why="the problems have that many micro-batches")
    for i, d in enumerate(sequence("data", data)):
        one_of(f"data[{i}]", d, DATASETS)
    if runs is not None:
        result("runs", runs, {str: {str: FrameworkRun}}, "what al.frameworks.run_all(...) returns")
