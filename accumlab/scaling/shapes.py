"""What lesson 03's plots are handed, checked in one call per plot, so a hand-built or partial
dict or list is refused with what is wrong instead of failing inside with a KeyError."""

from __future__ import annotations

import torch

from .. import _validate
from .._validate import nonempty, positive_float, positive_int, result
from ..engine import Recipe
from . import _checks
from .weights import Weights, WindowCheck

GAP_ROW = {"lr": float, "relative_gap": float}
EXPLORER = {
    "recipe": Recipe,
    "lengths": nonempty([int]),
    "checks": nonempty([WindowCheck]),
    "weights": Weights,
    "ratio": torch.Tensor,
}


def _title(value) -> None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"title must be a str, got {type(value).__name__} {value!r:.60}")


def sample_weights(weights, title) -> None:
    what = "a dict from labels to al.scaling.sample_weights(...) or effective_weights(...) results"
    result("weights", weights, {str: Weights}, what)
    _title(title)


def token_weights(panels, lengths, micro_batch_size, title) -> list[int]:
    """{label: (sequences, tokens) tensor of finite weights} for the sequences `lengths` names."""
    lengths = _checks.counts(lengths, "lengths")
    what = "a dict from labels to al.scaling.token_weights(...) results"
    result("panels", panels, {str: torch.Tensor}, what)
    for label, matrix in panels.items():
        _validate.tensor(f"panels[{label!r}]", matrix, dim=2, finite=True)
        if len(matrix) != len(lengths) or matrix.shape[1] < max(lengths):
            raise ValueError(
                f"panels[{label!r}] has shape {tuple(matrix.shape)}, but lengths name "
                f"{len(lengths)} sequences of up to {max(lengths)} tokens"
            )
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    _title(title)
    return lengths


def window_errors(checks, title) -> None:
    what = "what al.scaling.window_errors(...) returns"
    result("checks", checks, nonempty([WindowCheck]), what)
    _title(title)


def linear_scaling_gap(rows, title) -> None:
    """Rows of `linear_scaling_gap`: lr and relative_gap > 0, both drawn on log axes."""
    result("rows", rows, nonempty([GAP_ROW]), "what al.scaling.linear_scaling_gap(...) returns")
    for i, row in enumerate(rows):
        positive_float(f"rows[{i}]['lr']", row["lr"])
        positive_float(f"rows[{i}]['relative_gap']", row["relative_gap"])
    _title(title)


TRAINING = {
    "epoch": nonempty([int]),
    "full batch": nonempty([float]),
    "global count": nonempty([float]),
    "mean of means": nonempty([float]),
}


def token_training(curves, title) -> None:
    """What `token_training` returns: equally long lists of finite losses, one per epoch."""
    result("curves", curves, TRAINING, "what al.scaling.token_training(...) returns")
    for way in ("full batch", "global count", "mean of means"):
        _validate.finite_floats(f"curves[{way!r}]", curves[way])
    _validate.same_length(**{k: curves[k] for k in TRAINING})
    _title(title)


def explorer(data) -> None:
    result("data", data, EXPLORER, "what al.scaling.loss_scaling_data(...) returns")
