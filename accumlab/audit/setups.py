"""The tiny models and data sets the audit's gallery runs on (lesson 08)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._validate import one_of
from ..data import regression_data, token_data
from ..models import TinyLM, mlp


def audit_setup(name: str = "regression", **options) -> dict:
    """Keyword arguments for `al.audit` on a fresh tiny model and data set. Lesson 08.

    regression: 40 samples, micro-batches of 4, k = 4, so the epoch has windows of 4, 4 and 2.
    tokens: 14 padded sequences of 2–12 real tokens, micro-batches of 2, k = 3 (windows 3, 3, 1).
    batchnorm: the regression setup with a BatchNorm MLP.
    float32: the regression setup in float32 (match tolerance 1e-5 instead of 1e-9).
    uneven: the regression setup in micro-batches of 3, so each epoch's last one holds 1 sample
    (windows of 4, 4, 4 and 2 micro-batches, the last of 3 + 1 samples).
    overflow: the float32 setup with targets 30 times larger, so under float16 autocast the
    scaled gradients of some windows overflow and a GradScaler skips their updates.
    `options` (max_norm, scheduler, scaler, ...) are passed on to `al.audit`.
    """
    one_of("name", name, SETUPS)
    if options:  # al.audit(..., **setup) would fail later with Python's own TypeError
        import inspect

        from .auditor import audit

        known = [p for p in inspect.signature(audit).parameters if p != "train_fn"]
        for option in options:
            one_of("options", option, known)
    return {**SETUPS[name](), **options}


def _regression(norm: str = "none", dtype: torch.dtype = torch.float64, size: int = 4) -> dict:
    return {
        "model": mlp(features=4, hidden=8, depth=1, norm=norm, seed=0, dtype=dtype),
        "data": regression_data(n=40, features=4, seed=0).to(dtype),
        "micro_batch_size": size,
        "accumulation_steps": 4,
        "loss": "mse",
    }


def _tokens() -> dict:
    return {
        "model": TinyLM(vocab=16, dim=8, seed=0),
        "data": token_data(n=14, min_len=2, max_len=12, vocab=16, seed=0),
        "micro_batch_size": 2,
        "accumulation_steps": 3,
        "loss": "cross_entropy",
    }


# what `options` may set: al.audit's keyword arguments beyond the setup's own
AUDIT_OPTIONS = (
    "lr",
    "max_norm",
    "scheduler",
    "scaler",
    "last_window",
    "rtol",
    "time_limit",
    "loss",
)

SETUPS: dict[str, Callable[[], dict]] = {
    "regression": _regression,
    "tokens": _tokens,
    "batchnorm": lambda: _regression("batch"),
    "float32": lambda: _regression(dtype=torch.float32),
    "uneven": lambda: _regression(size=3),
    "overflow": lambda: _overflowing(),
}


def _overflowing() -> dict:
    setup = _regression(dtype=torch.float32)
    data = setup["data"]
    return {**setup, "data": type(data)(data.x, data.y * 30.0)}
