"""Which statistics each micro-batch normalises with, and the gradient mismatch they cause.
Lesson 04."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate
from .._threads import one_thread
from ..compare import GradDiff, grad_diff
from ..data import Data
from ..engine import forward
from ..reference import accumulated_grads, full_batch_grads
from .layers import _NORM_TYPES, _module, check_micro_batches


def _stat_layer(model: nn.Module) -> tuple[nn.Module, bool]:
    """The module whose input BatchNorm would normalise: the first norm layer (its input), else the
    first Linear (its output, which feeds the norm slot in `al.mlp`)."""
    for m in model.modules():
        if isinstance(m, _NORM_TYPES):
            return m, True
    for m in model.modules():
        if isinstance(m, nn.Linear):
            return m, False
    raise ValueError(
        "model has neither a normalisation layer nor a Linear layer to take statistics at"
    )


def norm_inputs(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Features entering the first normalisation layer for inputs `x` (no running stats touched)."""
    _module(model)
    _validate.tensor("x", x)
    model = copy.deepcopy(model)  # a forward in training mode would update the caller's buffers
    layer, is_norm = _stat_layer(model)
    seen = []
    if is_norm:
        handle = layer.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach()))
    else:
        handle = layer.register_forward_hook(lambda _m, _args, out: seen.append(out.detach()))
    try:
        with torch.no_grad():
            forward(model, x, "x")
    finally:
        handle.remove()
    return seen[0]


@one_thread()
def micro_batch_stats(model: nn.Module, data: Data, micro_batch_size: int) -> dict:
    """Per-channel mean and variance of each micro-batch at the input of the first normalisation
    layer, and those of the full batch; variances are biased (÷ n). For a BatchNorm these are what
    it normalises with (`layer_statistics` reads them back from the layer itself); a LayerNorm or
    GroupNorm ignores them.

    Returns {"micro_means", "micro_vars": (micro-batches, channels), "full_mean", "full_var",
    "between_var" (variance of the micro-batch means), "sizes", "layer", "used_by_layer"}.
    Lesson 04.
    """
    check_micro_batches(model, data, micro_batch_size)
    layer, is_norm = _stat_layer(model)
    feats = norm_inputs(model, data.x)
    chunks = feats.split(micro_batch_size)
    means = torch.stack([c.mean(0) for c in chunks])
    vars_ = torch.stack([c.var(0, unbiased=False) for c in chunks])
    sizes = torch.tensor([len(c) for c in chunks], dtype=feats.dtype)
    w = sizes / sizes.sum()
    full_mean = feats.mean(0)
    return {
        "micro_means": means,
        "micro_vars": vars_,
        "full_mean": full_mean,
        "full_var": feats.var(0, unbiased=False),
        # law of total variance: full var = weighted mean of micro vars + this spread of the means
        "between_var": (w[:, None] * (means - full_mean) ** 2).sum(0),
        "sizes": [len(c) for c in chunks],
        "micro_batch_size": micro_batch_size,
        # which layer the statistics are taken at: only a BatchNorm normalises with them
        "layer": type(layer).__name__ if is_norm else "no norm layer",
        "used_by_layer": isinstance(layer, nn.modules.batchnorm._BatchNorm),
    }


@one_thread()
def batch_gradient_diff(
    model: nn.Module, data: Data, micro_batch_size: int, *, loss="cross_entropy"
) -> GradDiff:
    """Accumulated (one window over all of `data`) vs full-batch gradient. Lesson 04.

    Uses the "global" normalisation, exact for unequal micro-batches, so any mismatch left comes
    from the model itself (BatchNorm, dropout), not from how the loss was divided.
    """
    check_micro_batches(model, data, micro_batch_size)
    acc = accumulated_grads(model, data, micro_batch_size, normalization="global", loss=loss)
    return grad_diff(acc, full_batch_grads(model, data, loss=loss))


def gradient_mismatch(
    model: nn.Module, data: Data, micro_batch_sizes, *, loss="cross_entropy"
) -> dict:
    """`batch_gradient_diff` for each micro-batch size: {"micro_batch_sizes", "max_rel", "diffs"}.
    Lesson 04."""
    _validate.data("data", data)
    sizes = _validate.positive_ints("micro_batch_sizes", micro_batch_sizes)
    # per size: one accumulated window of ceil(n / size) micro-batches and one full batch
    steps = sum(-(-len(data) // mb) + 1 for mb in sizes)
    _validate.within_max_steps(f"micro-batches over all {len(sizes)} micro_batch_sizes", steps)
    diffs = [batch_gradient_diff(model, data, mb, loss=loss) for mb in sizes]
    return {"micro_batch_sizes": sizes, "max_rel": [d.max_rel for d in diffs], "diffs": diffs}
