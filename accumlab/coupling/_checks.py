"""Argument checks the lesson 09 functions share, in accumlab's words: the core's checks
(`accumlab._validate`) under the names this folder's modules call."""

from __future__ import annotations

from torch import nn

from .. import _validate
from ..data import Data


def require_data(value, name: str = "data") -> Data:
    """An accumlab Data with samples and no NaN/inf."""
    return _validate.data(name, value)


def require_model(value, name: str = "model") -> nn.Module:
    """A torch.nn.Module with trainable, finite parameters."""
    return _validate.model(name, value)


def require_seed(value, name: str = "seed") -> int:
    return _validate.seed(name, value)


def describe(value) -> str:
    """A short description for an error message: a tensor by its shape, anything else by repr."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"a tensor of shape {tuple(value.shape)}"
    return f"{type(value).__name__} {value!r:.60}"


def require_bool(value, name: str) -> bool:
    return _validate.flag(name, value)
