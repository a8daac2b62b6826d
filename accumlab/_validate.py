"""Argument checks shared by every module: one clear ValueError naming the parameter and value."""

from __future__ import annotations

from collections.abc import Iterable


def positive_int(name: str, value, *, minimum: int = 1) -> int:
    # bool is an int subclass; True as a batch size is always a mistake
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def one_of(name: str, value, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def positive_float(name: str, value, *, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        ok = value >= 0 if allow_zero else value > 0
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a number {bound}, got {value!r}")
    return float(value)
