"""What lessons 00 and 02's results look like, so the plot can say what is wrong with a dict it is
handed (a hand-built or partial one) instead of failing inside with a KeyError."""

from __future__ import annotations

import torch

from .. import _validate
from .._validate import nonempty, result
from ..compare import GradDiff

PROGRESS = {
    "names": nonempty([str]),
    "accumulated": torch.Tensor,
    "full": torch.Tensor,
    "samples": int,
    "zero_grad": str,
    "divide_by_k": bool,
    "diff": GradDiff,
}


def progress(name: str, value) -> dict:
    """What `window_progress` returns: `accumulated` (k, values) and `full` (values,), finite
    (a NaN would leave the axis limits undefined), one name per value."""
    result(name, value, PROGRESS, "what al.accumulation.window_progress(...) returns")
    acc = _validate.tensor(f"{name}['accumulated']", value["accumulated"], dim=2, finite=True)
    full = _validate.tensor(f"{name}['full']", value["full"], dim=1, finite=True)
    if not len(acc) or acc.shape[1] != len(full) or len(value["names"]) != len(full):
        raise ValueError(
            f"{name} must hold one name and one column of 'accumulated' per value of 'full' "
            f"({len(full)}), got {len(value['names'])} names and 'accumulated' of shape "
            f"{tuple(acc.shape)}"
        )
    return value


def title(name: str, value) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a str or None, got {type(value).__name__} {value!r:.60}")
    return value
