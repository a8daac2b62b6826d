"""What lesson 10's results look like, so its plots and the explorer's summary can say what is
wrong with what they are handed instead of failing inside with a KeyError or AttributeError."""

from __future__ import annotations

from .._validate import (
    finite_floats,
    instance,
    nonempty,
    one_of,
    positive_float,
    positive_int,
    result,
    sequence,
)
from .checkpoints import ResumeCheck
from .counters import Schedule
from .logs import LOGGED
from .loop import Run
from .tokens import TokenBudget

EXPLORER = {
    "schedule": Schedule,
    # empty logs: a setting that never reaches an optimizer step (k above every window's reach)
    "logs": {"window": [float], "sum_of_scaled": [float]},
    "stop_at": int,
    "stop_step": int,
    "in_window": int,
    "omission": str,
    "bit_exact": bool,
    "rel_error": float,
    "error_steps": [int],
    "errors": [float],
    "steps": int,
    "extra_reads": int,
    "missed_reads": int,
}


def logged(name: str, value, keys) -> tuple:
    """{k: logged_curves(...)} holding each of `keys` (names from LOGGED)."""
    keys = tuple(sequence("keys", keys))
    for i, key in enumerate(keys):
        one_of(f"keys[{i}]", key, LOGGED)
    what = "a dict from k to al.bookkeeping.logged_curves(...) results"
    result(name, value, {str: {key: nonempty([float]) for key in keys}}, what)
    for k, curves in value.items():
        positive_int(f"{name} keys (the k of each run)", k)
        for key in keys:  # a NaN point would silently break the line
            finite_floats(f"{name}[{k!r}][{key!r}]", curves[key])
    return keys


def schedules(name: str, value) -> dict:
    what = "a dict from labels to al.bookkeeping.step_schedule(...) results"
    return result(name, value, {str: Schedule}, what)


def runs(name: str, value) -> dict:
    return result(name, value, {str: Run}, "a dict from labels to al.bookkeeping.train(...) runs")


def lr_curves(name: str, value, peak_lr) -> dict:
    peak_lr = positive_float("peak_lr", peak_lr)
    result(name, value, {str: nonempty([float])}, "a dict from labels to lr factors")
    for label, lrs in value.items():
        finite_floats(f"{name}[{label!r}]", lrs, minimum=0.0)
    return value


def checks(name: str, value) -> list:
    what = "what al.bookkeeping.resume_damage(...) returns"
    return result(name, value, nonempty([ResumeCheck]), what)


def budget(name: str, value) -> TokenBudget:
    what = "the TokenBudget al.bookkeeping.tokens_per_step(...) returns"
    return instance(name, value, TokenBudget, what)


def explorer(name: str, value) -> dict:
    return result(name, value, EXPLORER, "what al.bookkeeping.bookkeeping_data(...) returns")
