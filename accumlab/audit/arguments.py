"""Checks on `al.audit`'s arguments: a ValueError naming the parameter and the value (lesson 08)."""

from __future__ import annotations

import math

from .._validate import one_of, positive_float, positive_int
from .spec import MAX_EPOCHS, MAX_RTOL, POLICIES

MAX_LR = 10.0  # the audit's plain SGD; a larger learning rate is almost certainly a typo
MAX_TIME_LIMIT = 600.0
MAX_MICRO_BATCHES = 1000  # every micro-batch's gradient is recomputed at each step's parameters


def bounded(name: str, value, high: float, why: str) -> float:
    """A finite number in (0, high]; `why` says where the bound comes from."""
    value = positive_float(name, value)
    if not math.isfinite(value) or value > high:
        where = f"in (0, {high:g}]" if math.isfinite(high) else "> 0"
        raise ValueError(f"{name} must be a finite number {where} ({why}), got {value!r}")
    return value


def check_options(
    *, lr, rtol, max_norm, time_limit, last_window, epochs, micro_batches: int
) -> dict[str, object]:
    """Validated options; raises ValueError naming the first bad one."""
    out = {
        "lr": bounded("lr", lr, MAX_LR, "a larger one is almost certainly a typo"),
        "rtol": None
        if rtol is None
        else bounded("rtol", rtol, MAX_RTOL, "the bugs the audit names differ by more"),
        "max_norm": None
        if max_norm is None
        else bounded("max_norm", max_norm, math.inf, "a clipping threshold"),
        "time_limit": bounded("time_limit", time_limit, MAX_TIME_LIMIT, "seconds"),
        "last_window": one_of("last_window", last_window, POLICIES),
        "epochs": positive_int(
            "epochs",
            epochs,
            maximum=MAX_EPOCHS,
            why="two show what happens to a short last window; each epoch re-runs every check",
        ),
    }
    if micro_batches * out["epochs"] > MAX_MICRO_BATCHES:
        raise ValueError(
            f"data splits into {micro_batches} micro-batches, {micro_batches * out['epochs']} over "
            f"{out['epochs']} epoch(s); the audit recomputes each one's gradient at every step, so "
            f"keep the run to at most {MAX_MICRO_BATCHES} (use fewer samples, a bigger "
            "micro_batch_size or fewer epochs)"
        )
    return out
