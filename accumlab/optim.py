"""The one optimizer factory the engine, the memory measurements and the audit share (lesson 02+)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from ._validate import one_of, positive_float

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
    if isinstance(params, (str, bytes, torch.nn.Module, torch.Tensor)) or not isinstance(
        params, Iterable
    ):
        raise ValueError(
            f"params must be an iterable of tensors such as model.parameters(), got "
            f"{type(params).__name__}"
        )
    params = list(params)
    if not params:
        raise ValueError("params is empty: the model has no parameters for an optimizer to update")
    for p in params:
        if not isinstance(p, torch.Tensor):  # param groups (dicts) are for hand-built optimizers
            raise ValueError(f"params must hold tensors, got a {type(p).__name__}: {p!r:.60}")
    if callable(optimizer):
        opt = optimizer(params)
        if not isinstance(opt, torch.optim.Optimizer):
            raise ValueError(
                "optimizer, when a function, must return a torch.optim.Optimizer built on the "
                f"parameters it is given, got {type(opt).__name__} {opt!r:.60}"
            )
        return opt
    one_of("optimizer", optimizer, OPTIMIZERS)
    # NaN or inf would be accepted by torch and make every parameter NaN after the first step
    lr = positive_float("lr", lr, allow_zero=True)
    return OPTIMIZERS[optimizer](params, lr)
