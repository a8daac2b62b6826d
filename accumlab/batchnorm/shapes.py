"""What lesson 04's plots are handed, checked in one call per plot, so a hand-built or partial
dict is refused with what is wrong instead of failing inside with a KeyError."""

from __future__ import annotations

import torch

from .. import _validate
from .._validate import (
    MAX_STEPS,
    finite_float,
    finite_floats,
    nonempty,
    positive_float,
    positive_int,
    positive_ints,
    result,
    same_length,
)
from ..compare import GradDiff
from .running import check_momentum

PAIR = (tuple, list)  # (xs, ys)
STATS = {
    "micro_means": torch.Tensor,
    "micro_vars": torch.Tensor,
    "full_mean": torch.Tensor,
    "full_var": torch.Tensor,
    "micro_batch_size": int,
}
TRAJECTORY = {
    "accumulated": PAIR,
    "full": PAIR,
    "target": float,
    "channel": int,
    "accumulation_steps": int,
}
TRAINING = {"labels": nonempty([str]), "losses": [nonempty([float])], "accuracy": [float]}
DROPOUT = {"draws": nonempty([int]), "rel_gap": nonempty([float])}
EXPLORER = {
    "norm": str,
    "momentum": float,
    "stats": STATS,
    "diff": GradDiff,
    "trajectory": (TRAJECTORY, type(None)),
}


def _text(name: str, value) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, got {type(value).__name__} {value!r:.60}")


def _pair(name: str, value, what: str = "(xs, ys)") -> tuple:
    if not isinstance(value, PAIR) or len(value) != 2:
        raise ValueError(f"{name} must be a pair {what}, got {type(value).__name__} {value!r:.60}")
    return tuple(value)


def _series(name: str, value) -> None:
    """(xs, ys): two equally long, non-empty lists of finite numbers."""
    xs, ys = _pair(name, value)
    xs, ys = finite_floats(f"{name}[0]", xs), finite_floats(f"{name}[1]", ys)
    if len(xs) != len(ys):
        raise ValueError(f"{name} must pair each x with a y, got {len(xs)} xs and {len(ys)} ys")


def _stats(name: str, value) -> None:
    result(name, value, STATS, "what al.batchnorm.micro_batch_stats(...) returns")
    means = _validate.tensor(f"{name}['micro_means']", value["micro_means"], dim=2, finite=True)
    for key, dim in (("micro_vars", 2), ("full_mean", 1), ("full_var", 1)):
        t = _validate.tensor(f"{name}[{key!r}]", value[key], dim=dim, finite=True)
        if t.shape[-1] != means.shape[1] or (dim == 2 and len(t) != len(means)):
            raise ValueError(
                f"{name}[{key!r}] has shape {tuple(t.shape)}, which does not match "
                f"{name}['micro_means'] of shape {tuple(means.shape)} (micro-batches, channels)"
            )


def _trajectory(name: str, value) -> None:
    result(name, value, TRAJECTORY, "what al.batchnorm.running_mean_trajectory(...) returns")
    _series(f"{name}['accumulated']", value["accumulated"])
    _series(f"{name}['full']", value["full"])


def micro_batch_stats(stats, channels) -> None:
    _stats("stats", stats)
    positive_int("channels", channels)


def gradient_mismatch(curves, xlabel, title) -> None:
    """{label: (micro-batch sizes, errors)}: sizes >= 1 (a log axis), errors finite and >= 0 (an
    exact 0 is drawn at the floor)."""
    result("curves", curves, {str: PAIR}, "a dict from labels to (sizes, errors) pairs")
    for label, curve in curves.items():
        name = f"curves[{label!r}]"
        _series(name, curve)
        positive_ints(f"{name}[0]", curve[0])
        finite_floats(f"{name}[1]", curve[1], minimum=0.0)
    _text("xlabel", xlabel)
    _text("title", title)


def old_weight(momentum, matched, accumulation_steps, measured) -> None:
    check_momentum("momentum", momentum)
    check_momentum("matched", matched)
    positive_int("accumulation_steps", accumulation_steps, maximum=MAX_STEPS, why="a point each")
    result("measured", measured, dict, "a dict from labels to (updates, weight) points")
    for label, point in measured.items():
        x, w = _pair(f"measured[{label!r}]", point, "(updates, weight)")
        finite_float(f"measured[{label!r}][0]", x)
        finite_float(f"measured[{label!r}][1]", w)


def trajectory(traj) -> None:
    _trajectory("traj", traj)


def training(value) -> None:
    result("result", value, TRAINING, "what al.batchnorm.training_comparison(...) returns")
    same_length(labels=value["labels"], losses=value["losses"], accuracy=value["accuracy"])


def dropout_expectation(value) -> None:
    """Draws and gaps > 0: both axes are logarithmic."""
    result("result", value, DROPOUT, "what al.batchnorm.dropout_expectation(...) returns")
    positive_ints("result['draws']", value["draws"])
    for i, gap in enumerate(value["rel_gap"]):
        positive_float(f"result['rel_gap'][{i}]", gap)
    same_length(draws=value["draws"], rel_gap=value["rel_gap"])
    if "noise_gap" in value:
        noise = finite_floats("result['noise_gap']", value["noise_gap"], minimum=0.0)
        if len(noise) != len(value["draws"]) or min(noise) <= 0:
            raise ValueError(
                "result['noise_gap'] must hold one gap > 0 per draw (a logarithmic axis), got "
                f"{len(noise)} values for {len(value['draws'])} draws, smallest {min(noise, default=0)}"
            )


def explorer(data) -> None:
    result("data", data, EXPLORER, "what al.batchnorm.explore_batchnorm(...) returns")
    _stats("data['stats']", data["stats"])
    if data["trajectory"] is not None:
        _trajectory("data['trajectory']", data["trajectory"])
