"""Remedies for BatchNorm under accumulation: freeze it, ghost batch norm, and what SyncBatchNorm
changes. Lesson 04."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate
from .._validate import positive_int
from ..data import Data
from .layers import _check_data, _module, batchnorm_layers
from .stats import batch_gradient_diff


def freeze_batchnorm(model: nn.Module) -> nn.Module:
    """Switch `model`'s BatchNorm layers to eval mode, in place, and return `model` (as
    `model.eval()` does): they normalise with their running statistics and no longer update them,
    so each sample's output ignores its micro-batch (the usual setting when fine-tuning). Other
    layers keep their mode. Lesson 04 (exercise 04.3 asks for the same, in place).

    Only a layer that keeps running statistics can be frozen: one built with
    track_running_stats=False has none and normalises with the batch's statistics in eval mode
    too, so it is refused (freezing it would leave accumulation as mismatched as before)."""
    _module(model)
    for name, bn in model.named_modules():
        if isinstance(bn, nn.modules.batchnorm._BatchNorm) and bn.running_mean is None:
            raise ValueError(
                f"model's BatchNorm layer {name!r} keeps no running statistics "
                "(track_running_stats=False): in eval mode it still normalises with each "
                "batch's statistics, so freezing it cannot make accumulation exact; build it "
                "with track_running_stats=True, or use norm='group' or 'layer'"
            )
    for bn in batchnorm_layers(model):
        bn.eval()
    return model


class GhostBatchNorm1d(nn.BatchNorm1d):
    """BatchNorm1d that, in training mode, normalises each consecutive chunk of `ghost_batch_size`
    samples with that chunk's own statistics and updates the running statistics once per chunk —
    exactly what accumulating micro-batches of that size does to a plain BatchNorm (Hoffer et al.,
    2017). In eval mode it is a plain BatchNorm1d. Lesson 04."""

    def __init__(self, num_features: int, ghost_batch_size: int, **kwargs):
        positive_int("num_features", num_features)
        # weight, bias, running mean and variance: four values (of up to 8 bytes) per feature
        _validate.fits_in_memory(
            f"GhostBatchNorm1d(num_features={num_features}, ...)", 32 * num_features
        )
        super().__init__(num_features, **kwargs)
        self.ghost_batch_size = positive_int("ghost_batch_size", ghost_batch_size, minimum=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return super().forward(x)
        chunks = x.split(self.ghost_batch_size)
        if len(chunks[-1]) < 2:
            raise ValueError(
                f"ghost_batch_size={self.ghost_batch_size} leaves a last chunk of 1 sample out of "
                f"{len(x)}: BatchNorm needs at least 2 samples to compute a variance"
            )
        return torch.cat([super(GhostBatchNorm1d, self).forward(c) for c in chunks])

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, ghost_batch_size={self.ghost_batch_size}"


def ghost_batchnorm(model: nn.Module, ghost_batch_size: int) -> nn.Module:
    """A copy of `model` with every BatchNorm1d replaced by a GhostBatchNorm1d carrying the same
    weights, running statistics and momentum. Lesson 04."""
    _module(model)
    positive_int("ghost_batch_size", ghost_batch_size, minimum=2)
    model = copy.deepcopy(model)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.BatchNorm1d:
                ghost = GhostBatchNorm1d(
                    child.num_features,
                    ghost_batch_size,
                    eps=child.eps,
                    momentum=child.momentum,
                    affine=child.affine,
                    track_running_stats=child.track_running_stats,
                ).to(dtype=next(iter(child.state_dict().values())).dtype)
                ghost.load_state_dict(child.state_dict())
                ghost.train(child.training)
                setattr(parent, name, ghost)
    return model


def sync_batchnorm_sweep(
    model: nn.Module, data: Data, micro_batch_size: int, ranks=(1, 2, 4)
) -> dict:
    """What SyncBatchNorm changes under accumulation, computed on one process.

    With R ranks each holding `micro_batch_size` samples, SyncBatchNorm all-reduces the statistics
    inside each forward, so every statistic covers R × micro_batch_size samples; DDP then averages
    the gradients. That equals one process normalising R × micro_batch_size samples at once, i.e.
    accumulation with micro-batches of that size. The global batch is all of `data`, so each R uses
    k = len(data) / (R × micro_batch_size) micro-steps. Lesson 04.
    """
    _validate.model("model", model)
    _check_data(data)
    positive_int("micro_batch_size", micro_batch_size)
    ranks = _validate.positive_ints("ranks", ranks)
    # per rank count: one window of len(data) / group micro-batches and one full batch
    steps = sum(-(-len(data) // (r * micro_batch_size)) + 1 for r in ranks)
    _validate.within_max_steps(f"micro-batches over all {len(ranks)} ranks", steps)
    out = {"ranks": [], "statistics_size": [], "accumulation_steps": [], "max_rel": []}
    for r in ranks:
        group = r * micro_batch_size
        if len(data) % group:
            raise ValueError(
                f"ranks × micro_batch_size = {group} must divide the {len(data)} samples of the global batch"
            )
        out["ranks"].append(r)
        out["statistics_size"].append(group)
        out["accumulation_steps"].append(len(data) // group)
        out["max_rel"].append(batch_gradient_diff(model, data, group).max_rel)
    return out
