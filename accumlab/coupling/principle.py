"""The principle of lesson 09, as a test any batch loss can take: accumulating micro-batches gives
the big batch's gradient exactly iff the loss is a (fixed-weight) sum of per-sample terms.

A plain loop weights each micro-batch's loss by what the reduction makes of it: len(mb) / N for a
mean (each sample's weight 1/N, whatever micro-batch holds it), 1 for a sum. The test takes the
reduction as an argument, so that a sum-reduced loss is not mistaken for a coupled one."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

from .._threads import one_thread
from .._validate import one_of
from ..compare import GradDiff, grad_diff
from ..data import Data
from ..engine import grads_of
from ..losses import get_loss
from ..run_inputs import forward
from ._checks import describe, require_data, require_model

BatchLoss = Callable[[nn.Module, Data], torch.Tensor]  # (model, batch) -> the batch's loss
REDUCTIONS = ("mean", "sum")  # how batch_loss reduces its per-sample terms


def _check(model, data, batch_loss, reduction: str = "mean") -> None:
    one_of("reduction", reduction, REDUCTIONS)
    require_model(model)
    require_data(data)
    if not callable(batch_loss):
        raise ValueError(
            f"batch_loss must be a function (model, batch) -> loss, got {batch_loss!r}"
        )


def _loss(value) -> torch.Tensor:
    """What batch_loss returned: the batch's loss, a 0-d tensor with a graph to backpropagate."""
    if not isinstance(value, torch.Tensor) or value.dim() != 0 or value.grad_fn is None:
        raise ValueError(
            "batch_loss must return the batch's loss as a 0-d tensor computed from the model "
            f"(one backward follows), got {describe(value)}"
        )
    return value


@one_thread()
def batch_loss_grads(model: nn.Module, data: Data, batch_loss: BatchLoss) -> dict:
    """Gradient of `batch_loss(model, data)`: the big batch in one forward and one backward, on a
    copy of the model (the caller's .grad stays untouched). Lesson 09."""
    _check(model, data, batch_loss)
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    _loss(batch_loss(model, data)).backward()
    return grads_of(model)


@one_thread()
def naive_accumulated_grads(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    batch_loss: BatchLoss,
    *,
    reduction: str = "mean",
) -> dict:
    """What a plain accumulation loop produces: each micro-batch's loss, weighted by its share of the
    samples (len(mb) / N, the exact weight when `batch_loss` is a mean of per-sample terms) or by 1
    (`reduction="sum"`, a sum of them), backpropagated and summed in .grad. Lesson 09."""
    _check(model, data, batch_loss, reduction)
    micro = data.micro_batches(micro_batch_size)  # validates micro_batch_size
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    for mb in micro:
        weight = len(mb) / len(data) if reduction == "mean" else 1.0
        (_loss(batch_loss(model, mb)) * weight).backward()
    return grads_of(model)


@one_thread()
def accumulation_gap(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    batch_loss: BatchLoss,
    *,
    reduction: str = "mean",
) -> GradDiff:
    """How far naive accumulation lands from the big batch for this loss: 0 up to rounding when
    `batch_loss` is a mean of per-sample terms (or, with `reduction="sum"`, a sum of them), a
    real gap when samples are coupled. A sum-reduced loss tested as a mean reads as a gap: the
    loop would weight it by len(mb) / N. Lesson 09."""
    return grad_diff(
        naive_accumulated_grads(model, data, micro_batch_size, batch_loss, reduction=reduction),
        batch_loss_grads(model, data, batch_loss),
    )


def mse_loss(model: nn.Module, batch: Data) -> torch.Tensor:
    """Mean squared error of `model` on `batch`: a mean of per-sample terms (the control case)."""
    pred = forward(require_model(model), require_data(batch, "batch"), "batch")
    get_loss("mse").check(pred, batch.y)  # (n, 1) against (n,) would broadcast silently
    return torch.nn.functional.mse_loss(pred, batch.y)
