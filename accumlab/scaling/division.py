"""Lesson 03: what forgetting `loss / k` does to the update, per optimizer — and a loop that steps
only on `(i + 1) % k == 0`, which carries an epoch's leftover micro-batches into the next epoch."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate
from .._validate import one_of, positive_float, positive_int
from ..compare import grad_diff
from ..data import Data
from ..engine import Recipe, forward, grads_of, params_of, run
from ..losses import get_loss

# torch.optim classes by name; weight_decay means coupled L2 for SGD and Adam, decoupled for AdamW
DECAY_OPTIMIZERS = {
    "sgd": torch.optim.SGD,
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
}


def _update(model, data, recipe, optimizer, lr, weight_decay, epochs, loss):
    trace = run(
        recipe,
        model,
        data,
        loss=loss,
        optimizer=lambda params: DECAY_OPTIMIZERS[optimizer](
            params, lr=lr, weight_decay=weight_decay
        ),
        epochs=epochs,
    )
    return {n: trace.params[-1][n] - p for n, p in trace.initial_params.items()}


def forgotten_division(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    optimizer: str = "sgd",
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    epochs: int = 1,
    loss: str = "mse",
) -> dict:
    """Lesson 03: the update of a loop that forgets `loss / k` (at `lr`) against the correct loop at
    `lr` and at k·`lr`, after `epochs` passes over `data` with `torch.optim.<optimizer>`.

    Returns {"vs_same_lr", "vs_k_lr": GradDiff of the forgetful update against each correct one,
    "forgetful", "same_lr", "k_lr": the updates (final − initial parameters)}.
    """
    one_of("optimizer", optimizer, DECAY_OPTIMIZERS)
    k = positive_int("accumulation_steps", accumulation_steps)
    positive_float("lr", lr)
    positive_float("weight_decay", weight_decay, allow_zero=True)

    def update(normalization: str, step_lr: float):
        recipe = Recipe(micro_batch_size, k, normalization)
        return _update(model, data, recipe, optimizer, step_lr, weight_decay, epochs, loss)

    forgetful, same, k_lr = update("none", lr), update("mean", lr), update("mean", k * lr)
    return {
        "vs_same_lr": grad_diff(forgetful, same),
        "vs_k_lr": grad_diff(forgetful, k_lr),
        "forgetful": forgetful,
        "same_lr": same,
        "k_lr": k_lr,
    }


def step_every_kth(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    epochs: int = 2,
    lr: float = 0.05,
    loss: str = "mse",
) -> dict:
    """Lesson 03: the common hand-written loop, run for `epochs` epochs with SGD —

        optimizer.zero_grad()
        for epoch in range(epochs):
            for i, mb in enumerate(micro_batches):
                (loss(model(mb.x), mb.y) / k).backward()
                if (i + 1) % k == 0:
                    optimizer.step()
                    optimizer.zero_grad()

    When k does not divide the micro-batches of an epoch, the last ones are backpropagated but never
    stepped on: their gradient stays in `.grad` and joins the first window of the next epoch.

    Returns {"leftover_norm": the `.grad` norm left at the end of each epoch, "steps": one dict per
    optimizer step with "epoch", "grads" (what the step used) and "params" (parameters it started
    from)}. Works on a copy of `model`.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    k = positive_int("accumulation_steps", accumulation_steps)
    positive_int("epochs", epochs)
    positive_float("lr", lr)
    loss_fn = get_loss(loss)
    micro = data.micro_batches(micro_batch_size)
    _validate.within_max_steps(
        f"epochs × micro-batches per epoch = {epochs} × {len(micro)}", epochs * len(micro)
    )
    model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    out = {"leftover_norm": [], "steps": []}
    optimizer.zero_grad()
    for epoch in range(epochs):
        for i, mb in enumerate(micro):
            loss_sum, count = loss_fn(forward(model, mb, f"micro-batch {i}"), mb.y)
            (loss_sum / count / k).backward()
            if (i + 1) % k == 0:
                out["steps"].append(
                    {"epoch": epoch, "grads": grads_of(model), "params": params_of(model)}
                )
                optimizer.step()
                optimizer.zero_grad()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        out["leftover_norm"].append(
            float(torch.cat([g.reshape(-1) for g in grads]).norm()) if grads else 0.0
        )
    return out


def with_params(model: nn.Module, params: dict[str, torch.Tensor]) -> nn.Module:
    """A copy of `model` holding `params` (e.g. a step's starting point from `step_every_kth`).
    Lesson 03."""
    _validate.instance("model", model, nn.Module, "a torch.nn.Module such as al.mlp()")
    _validate.tensor_dict("params", params)
    model = copy.deepcopy(model)
    names = {n for n, _ in model.named_parameters()}
    if set(params) != names:
        raise ValueError(
            f"params must name exactly the model's parameters {sorted(names)}, got {sorted(params)}"
        )
    for n, p in model.named_parameters():
        _validate.tensor(f"params[{n!r}]", params[n], finite=True)
        if params[n].shape != p.shape:
            raise ValueError(
                f"params[{n!r}] has shape {tuple(params[n].shape)}, the model's parameter "
                f"{tuple(p.shape)}"
            )
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(params[n])
    return model
