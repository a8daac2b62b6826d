"""The one optimizer factory the engine, the memory measurements and the audit share (lesson 02+)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from ._validate import one_of

# name -> (params, lr) -> Optimizer; the state each keeps per parameter is what lesson 05 measures
OPTIMIZERS: dict[str, Callable] = {
    "sgd": lambda params, lr: torch.optim.SGD(params, lr=lr),  # no state
    "sgd_momentum": lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9),  # one buffer
    "adam": lambda params, lr: torch.optim.Adam(params, lr=lr),  # two buffers
    "adamw": lambda params, lr: torch.optim.AdamW(params, lr=lr),  # two buffers
}


def make_optimizer(
    optimizer: str | Callable | None, params: Iterable[torch.Tensor], lr: float = 1e-3
) -> torch.optim.Optimizer | None:
    """A name from OPTIMIZERS, a callable `params -> Optimizer`, or None (gradients only, no
    update)."""
    if optimizer is None:
        return None
    if callable(optimizer):
        return optimizer(params)
    one_of("optimizer", optimizer, OPTIMIZERS)
    return OPTIMIZERS[optimizer](params, lr)
