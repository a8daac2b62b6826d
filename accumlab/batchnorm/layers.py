"""The lesson's BatchNorm models and data, and the one-sample check. Lesson 04.

Accumulation reproduces the full batch's gradient only when each sample's loss ignores the other
samples in its micro-batch. BatchNorm in training mode does not: it normalises with the statistics
of whatever batch it is given, and it updates its running statistics once per forward.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate
from .._validate import one_of, positive_int
from ..data import Data, classification_data
from ..engine import forward
from ..models import NORMS, mlp

_NORM_TYPES = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)


def batchnorm_layers(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    """Every BatchNorm layer of `model`, in order. Lesson 04."""
    _module(model)
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def _module(model, name: str = "model") -> nn.Module:
    """Any torch.nn.Module (frozen or not): for functions that copy or rearrange its layers."""
    return _validate.instance(name, model, nn.Module, "a torch.nn.Module such as al.mlp()")


def _check_data(data, name: str = "data") -> Data:
    return _validate.data(name, data)


def check_micro_batches(model: nn.Module, data: Data, micro_batch_size: int) -> None:
    """Raise a clear ValueError when a BatchNorm layer in training mode would see one value per
    channel in some micro-batch, which PyTorch refuses (no variance from one value). Lesson 04.

    PyTorch decides, on a copy of the model: BatchNorm1d on (1, C) fails, while BatchNorm2d on a
    single (1, C, H, W) image with H·W > 1 has H·W values per channel and is accepted."""
    _validate.model("model", model)
    _check_data(data)
    positive_int("micro_batch_size", micro_batch_size)
    if micro_batch_size > len(data):
        raise ValueError(
            f"micro_batch_size must be at most the number of samples ({len(data)}), got {micro_batch_size}"
        )
    if not any(bn.training for bn in batchnorm_layers(model)):
        return
    sizes = [len(mb) for mb in data.micro_batches(micro_batch_size)]
    if 1 not in sizes:  # two samples give every channel at least two values
        return
    try:
        with torch.no_grad():
            forward(copy.deepcopy(model), data[:1], "a one-sample micro-batch")
    except ValueError:
        where = (
            "every micro-batch"
            if micro_batch_size == 1
            else f"the last micro-batch of {len(data)} samples"
        )
        raise ValueError(
            f"micro_batch_size={micro_batch_size} gives {where} a single sample, but BatchNorm in "
            "training mode needs at least 2 samples per micro-batch to compute a variance; use "
            "micro_batch_size >= 2 (and a data size it leaves no single sample from), put BatchNorm "
            "in eval mode with al.batchnorm.freeze_batchnorm(model), or use norm='group' or 'layer'"
        ) from None


def norm_model(
    norm: str,
    *,
    features: int = 8,
    hidden: int = 16,
    outputs: int = 3,
    seed: int = 0,
    track_running_stats: bool = True,
    **kwargs,
):
    """The lesson's small classifier with normalisation `norm` ('batch', 'layer', 'group', 'none').

    The Linear weights depend only on `seed`, so models with different norms start alike.
    `track_running_stats=False` (norm='batch' only) builds BatchNorm layers that keep no running
    statistics: they normalise with the batch's statistics in eval mode too. Lesson 04.
    """
    one_of("norm", norm, NORMS)
    _validate.flag("track_running_stats", track_running_stats)
    if not track_running_stats and norm != "batch":
        raise ValueError(
            f"track_running_stats=False applies to norm='batch' only (norm={norm!r} keeps no "
            "running statistics anyway)"
        )
    model = mlp(features, hidden, outputs, norm=norm, seed=seed, **kwargs)
    if not track_running_stats:
        for i, layer in enumerate(model):
            if isinstance(layer, nn.BatchNorm1d):
                untracked = nn.BatchNorm1d(layer.num_features, track_running_stats=False)
                untracked.load_state_dict(
                    {k: v for k, v in layer.state_dict().items() if k in ("weight", "bias")}
                )
                model[i] = untracked.to(layer.weight.dtype)
    return model


def batchnorm_data(n: int = 64, *, seed: int = 0) -> Data:
    """Blobs shifted off zero and widely spread, so micro-batch statistics visibly differ. Lesson 04."""
    return classification_data(n=n, features=8, classes=3, spread=2.0, shift=3.0, seed=seed)


def refusal(layer: nn.Module, shape, *, training: bool = True) -> str | None:
    """PyTorch's error message when `layer` (a copy of it, in training or eval mode) is handed a
    tensor of `shape`, or None when it accepts it. BatchNorm refuses, in training mode only, an
    input that gives a channel a single value: BatchNorm1d on (1, C) or BatchNorm2d on
    (1, C, 1, 1); one (1, C, L) sequence or one (1, C, H, W) image has L or H·W values. Lesson 04.
    """
    _module(layer, "layer")
    shape = _validate.positive_ints("shape", shape)
    _validate.flag("training", training)
    numel = 1
    for size in shape:
        numel *= size
    _validate.fits_in_memory(f"an input of shape {tuple(shape)}", 8 * numel)
    layer = copy.deepcopy(layer).train(training)
    dtype = next((t.dtype for t in layer.state_dict().values() if t.is_floating_point()), None)
    x = torch.randn(shape, dtype=dtype or torch.get_default_dtype())
    try:
        with torch.no_grad():
            layer(x)
    except ValueError as err:  # PyTorch's own words, e.g. "Expected more than 1 value per channel"
        return str(err)
    return None
