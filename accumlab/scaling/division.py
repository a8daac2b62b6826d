"""Lesson 03: what forgetting `loss / k` does to the update, per optimizer — and a loop that steps
only on `(i + 1) % k == 0`, which carries an epoch's leftover micro-batches into the next epoch;
how many times one gradient is another (`multiple_of`)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import one_of, positive_float, positive_int
from ..compare import flatten, grad_diff
from ..data import Data
from ..engine import Recipe, forward, grads_of, params_of, run
from ..losses import get_loss

# torch.optim classes by name; weight_decay means coupled L2 for SGD and Adam, decoupled for AdamW
DECAY_OPTIMIZERS = {
    "sgd": torch.optim.SGD,
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
}


# the correct loop's hyperparameters the forgetful loop is compared with: lr or k·lr, λ or λ/k
CANDIDATES = ("lr, λ", "k·lr, λ", "lr, λ/k", "k·lr, λ/k")


def _update(model, data, recipe, make, epochs, loss):
    trace = run(recipe, model, data, loss=loss, optimizer=make, epochs=epochs)
    return {n: trace.params[-1][n] - p for n, p in trace.initial_params.items()}


def _momentum_options(optimizer: str, momentum, dampening, nesterov) -> dict:
    """SGD's momentum options, checked here: torch's own error names neither value."""
    momentum = _validate.fraction("momentum", momentum)
    dampening = _validate.fraction("dampening", dampening)
    nesterov = _validate.flag("nesterov", nesterov)
    if optimizer != "sgd":
        if momentum or dampening or nesterov:
            raise ValueError(
                f"momentum, dampening and nesterov are SGD's options; optimizer={optimizer!r} "
                f"got momentum={momentum}, dampening={dampening}, nesterov={nesterov}"
            )
        return {}
    if nesterov and (momentum == 0 or dampening != 0):
        raise ValueError(
            "nesterov=True needs momentum > 0 and dampening = 0 (as torch.optim.SGD), got "
            f"momentum={momentum}, dampening={dampening}"
        )
    return {"momentum": momentum, "dampening": dampening, "nesterov": nesterov}


@one_thread()
def forgotten_division(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    optimizer: str = "sgd",
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
    dampening: float = 0.0,
    nesterov: bool = False,
    eps: float | None = None,
    epochs: int = 1,
    loss: str = "mse",
) -> dict:
    """Lesson 03: the update of a loop that forgets `loss / k`, run with `torch.optim.<optimizer>`
    at (`lr`, `weight_decay` = λ), against the correct loop at each of CANDIDATES: lr or k·lr,
    λ or λ/k, after `epochs` passes over `data`. `momentum`, `dampening`, `nesterov`: SGD's;
    `eps`: Adam's and AdamW's ε (None: torch's default).

    The forgetful loop multiplies each window's gradient by that window's number of micro-batches:
    k for a full window, fewer for a short last one, so a candidate can match only when every
    window is full.

    Returns {"vs": {candidate: GradDiff of the forgetful update against that correct one},
    "forgetful": its update, "correct": {candidate: update}} (updates: final − initial
    parameters).
    """
    one_of("optimizer", optimizer, DECAY_OPTIMIZERS)
    k = positive_int("accumulation_steps", accumulation_steps)
    lr = positive_float("lr", lr)
    decay = positive_float("weight_decay", weight_decay, allow_zero=True)
    options = _momentum_options(optimizer, momentum, dampening, nesterov)
    if eps is not None:
        if optimizer == "sgd":
            raise ValueError(f"eps is Adam's and AdamW's option; optimizer='sgd' got eps={eps!r}")
        options["eps"] = positive_float("eps", eps)

    def update(normalization: str, step_lr: float, step_decay: float):
        def make(params):
            return DECAY_OPTIMIZERS[optimizer](
                params, lr=step_lr, weight_decay=step_decay, **options
            )

        recipe = Recipe(micro_batch_size, k, normalization)
        return _update(model, data, recipe, make, epochs, loss)

    settings = dict(
        zip(CANDIDATES, [(lr, decay), (k * lr, decay), (lr, decay / k), (k * lr, decay / k)])
    )
    forgetful = update("none", lr, decay)
    correct = {label: update("mean", *pair) for label, pair in settings.items()}
    return {
        "vs": {label: grad_diff(forgetful, u) for label, u in correct.items()},
        "forgetful": forgetful,
        "correct": correct,
    }


@one_thread()
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
    epochs = positive_int("epochs", epochs)
    lr = positive_float("lr", lr)
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


@dataclass(frozen=True)
class Multiple:
    """`grads` ≈ factor × `reference`: the least-squares factor and what it leaves unexplained,
    |grads − factor·reference| / |grads| (0 when one is exactly a multiple of the other)."""

    factor: float
    residual: float

    def __str__(self) -> str:
        return f"{self.factor:.4f} (residual {self.residual:.0e})"


def multiple_of(grads: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> Multiple:
    """How many times `reference` the gradients `grads` are, e.g. 2/3 of a window's full-batch
    gradient under `divide_by_k`, 5/3 after a carried-over leftover. Lesson 03."""
    _validate.tensor_dict("grads", grads)
    _validate.tensor_dict("reference", reference)
    if set(grads) != set(reference):
        raise ValueError(
            f"grads and reference must name the same parameters, got {sorted(grads)} and "
            f"{sorted(reference)}"
        )
    for n in grads:
        _validate.tensor(f"grads[{n!r}]", grads[n], finite=True)
        _validate.tensor(f"reference[{n!r}]", reference[n], finite=True)
        if grads[n].shape != reference[n].shape:
            raise ValueError(
                f"grads[{n!r}] has shape {tuple(grads[n].shape)}, reference[{n!r}] "
                f"{tuple(reference[n].shape)}"
            )
    g = flatten(grads).double()
    r = flatten(reference).to(g)
    if not bool(r.any()):
        raise ValueError("reference is zero everywhere: no multiple of it can be measured")
    factor = float(g @ r / (r @ r))
    size = float(g.norm())
    residual = float((g - factor * r).norm()) / size if size else 0.0
    return Multiple(factor, residual)
