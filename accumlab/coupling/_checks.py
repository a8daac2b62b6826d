"""Argument checks the lesson 09 functions share (accumlab's words, never a deep traceback)."""

from __future__ import annotations

from torch import nn

from ..data import Data


def require_data(value, name: str = "data") -> Data:
    if not isinstance(value, Data):
        raise ValueError(f"{name} must be an accumlab.Data, got {type(value).__name__}")
    return value


def require_model(value, name: str = "model") -> nn.Module:
    if not isinstance(value, nn.Module):
        raise ValueError(f"{name} must be a torch.nn.Module, got {type(value).__name__}")
    return value


def require_seed(value, name: str = "seed") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def describe(value) -> str:
    """A short description for an error message: a tensor by its shape, anything else by repr."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"a tensor of shape {tuple(value.shape)}"
    return repr(value)


def require_bool(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value
