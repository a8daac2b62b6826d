"""Argument checks the lesson 03 modules share, in accumlab's words: item counts, one number per
sample, traces."""

from __future__ import annotations

import torch

from .. import _validate
from .._validate import MAX_STEPS, positive_int
from ..engine import Trace


def counts(value, name: str = "counts") -> list[int]:
    """Items per sample (tokens per sequence): non-negative integers, as Python ints."""
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    counts = _validate.sequence(name, value)
    # one step of Python work per sample (and per micro-batch) below
    positive_int(f"len({name})", len(counts), maximum=MAX_STEPS, why="one step of work per sample")
    # the shared integer rule: int, numpy integers and integer 0-d tensors; never bool or float
    return [positive_int(f"{name}[{i}]", c, minimum=0) for i, c in enumerate(counts)]


def per_sample(name: str, value, n: int, like: str) -> torch.Tensor:
    """One finite number per sample (`like` names what gives their number, n), as a float64
    tensor of shape (n,)."""
    if isinstance(value, torch.Tensor):
        _validate.tensor(name, value, dim=1, finite=True)
    else:
        value = _validate.finite_floats(name, value)
    values = torch.as_tensor(value, dtype=torch.float64)
    if values.shape != (n,):
        raise ValueError(
            f"{name} must hold one number per sample, {n} as in {like}, got {len(values)}"
        )
    return values


def trace(value) -> Trace:
    return _validate.instance("trace", value, Trace, "what al.run(...) returns (a Trace)")
