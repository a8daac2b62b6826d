"""What the results of lessons 12 and 13 look like, so its plots can say what is wrong with what they are
handed instead of failing inside with a KeyError; and the pass lists the schedule code reads."""

from __future__ import annotations

import operator

from .._validate import (
    _is_int,
    finite_float,
    nonempty,
    positive_float,
    result,
    sequence,
)

ACCUMULATORS = {
    "ks": nonempty([int]),
    "errors": {str: nonempty([float])},
    "bytes": {str: dict},
    "parameters": int,
}
REPLAYS = {str: {"spans": nonempty([list]), "bubble": nonempty([float])}}
CURVES = {
    "micro_batches": nonempty([int]),
    "formula": {str: nonempty([float])},
    "replayed": {str: nonempty([float])},
}
RECOMPILES = {str: {"dynamic": nonempty([bool])}}
SWEEP = {"batch_sizes": nonempty([int]), "steps": nonempty([float]), "samples": nonempty([float])}
EXPLORER = {
    "schedule": str,
    "stages": int,
    "micro_batches": int,
    "slow_stage": float,
    "formula": float,
    "formula_curve": nonempty([float]),
    "refused": (str, type(None)),
    "spans": (list, type(None)),
    "makespan": float,
    "bubble": (float, type(None)),
    "in_flight": (int, type(None)),
}


def explorer(name: str, value) -> dict:
    return result(name, value, EXPLORER, "what al.scale.explorer_data(...) returns")


def passes(name: str, order) -> list[tuple[str, int]]:
    """One stage's order: (kind, micro-batch) pairs, kind "F" or "B", the index any integer type
    (the shared rule of `_validate`), returned as Python ints."""
    order = sequence(name, order, allow_empty=True)
    out = []
    for i, p in enumerate(order):
        ok = isinstance(p, (list, tuple)) and len(p) == 2 and p[0] in ("F", "B")
        if not ok or not _is_int(p[1]) or operator.index(p[1]) < 0:
            raise ValueError(
                f"{name}[{i}] must be a pass ('F' or 'B', micro-batch index) such as ('F', 0), "
                f"got {p!r}"
            )
        out.append((p[0], operator.index(p[1])))
    return out


def accumulators(name: str, value) -> dict:
    return result(name, value, ACCUMULATORS, "what al.scale.accumulator_errors(...) returns")


def replays(name: str, value) -> dict:
    return result(name, value, REPLAYS, "a dict from labels to al.scale.replay(...) results")


def curves(name: str, value, recorded) -> dict:
    if recorded is not None:
        result("recorded", recorded, {str: float}, "a dict from micro-batches m to bubbles")
    return result(name, value, CURVES, "what al.scale.bubble_curves(...) returns")


def step_weights(experiments, names) -> list:
    names = sequence("names", names)
    what = "the 'experiments' of what al.scale.pipeline_experiments(...) returns"
    result("experiments", experiments, dict, what)
    for i, n in enumerate(names):
        if n not in experiments:
            raise ValueError(
                f"names[{i}] must be one of the experiments {sorted(experiments)}, got {n!r}"
            )
        result(
            f"experiments[{n!r}]", experiments[n], {"weights": {"weights": nonempty([float])}}, what
        )
    return names


def recompiles(name: str, value) -> dict:
    what = "a dict from labels to al.scale.compiled_accumulation(...) results"
    return result(name, value, RECOMPILES, what)


def batch_sweep(sweep, fitted, curve, b_simple) -> None:
    result("sweep", sweep, SWEEP, "what al.scale.batch_size_sweep(...) returns")
    result("fitted", fitted, {"b_crit": float}, "what al.scale.fit(...) returns")
    result("curve", curve, SWEEP, "what al.scale.tradeoff_curve(...) returns")
    positive_float("b_simple", finite_float("b_simple", b_simple))
