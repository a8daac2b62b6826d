"""Rebuilding BatchNorm's running statistics after training: PyTorch's own
`torch.optim.swa_utils.update_bn` (a cumulative average over a pass of the data). Lesson 04."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate
from .._validate import positive_int
from ..data import Data
from ..engine import forward
from .layers import _check_data, batchnorm_layers


def recalibrate(model: nn.Module, data: Data, batch_size: int | None = None) -> nn.Module:
    """A copy of `model` whose BatchNorm running statistics are rebuilt by
    `torch.optim.swa_utils.update_bn` from `data` in batches of `batch_size` (default: all of it
    at once). update_bn resets the buffers, sets momentum=None (a cumulative average: every batch
    weighs the same), runs the forwards in training mode and puts momentum and mode back.

    "Mode back" is `model.train(was_training)` for the whole model: dropout runs in training mode
    during the pass, and a model whose BatchNorm layers were frozen (eval mode inside a model in
    training mode) comes back with every layer in training mode: re-freeze it afterwards.

    No gradient is needed, so the forwards run under no_grad (update_bn is decorated with it too):
    nothing is kept for a backward, though each forward still allocates its layers' outputs while
    it runs, so a batch larger than the training micro-batch still costs memory. Lesson 04."""
    _validate.model("model", model)
    _check_data(data)
    if not batchnorm_layers(model):
        raise ValueError("model has no BatchNorm layer: there are no running statistics to rebuild")
    if any(bn.running_mean is None for bn in batchnorm_layers(model)):
        raise ValueError(
            "model has a BatchNorm layer built with track_running_stats=False: it keeps no "
            "running statistics to rebuild"
        )
    batch_size = (
        len(data) if batch_size is None else positive_int("batch_size", batch_size, minimum=2)
    )
    if batch_size > len(data):
        raise ValueError(f"batch_size must be at most the {len(data)} samples, got {batch_size}")
    if len(data) % batch_size == 1:
        raise ValueError(
            f"batch_size={batch_size} leaves a last batch of 1 sample out of {len(data)}: "
            "BatchNorm in training mode needs at least 2"
        )
    model = copy.deepcopy(model)
    with torch.no_grad():
        # update_bn calls the model itself: a sample in eval mode first (no statistic changes),
        # so data the model cannot take is said in accumlab's words
        mode = model.training
        forward(model.eval(), data[:1], "a sample of data")
        model.train(mode)
        torch.optim.swa_utils.update_bn(list(data.x.split(batch_size)), model)
    return model
