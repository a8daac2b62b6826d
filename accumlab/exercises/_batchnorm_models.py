"""Exercise 04.3's model: every kind of BatchNorm layer a freeze must find, with dropout, an
InstanceNorm that tracks running statistics (a norm layer that must stay in training mode), and
running statistics, scales and shifts that are not the initial ones."""

from __future__ import annotations

import torch
from torch import nn

BATCHNORM = nn.modules.batchnorm._BatchNorm  # BatchNorm1d/2d/3d, SyncBatchNorm, LazyBatchNorm*
# normalises each sample on its own (exact under accumulation) but, tracking running statistics,
# computes something else in eval mode: a freeze that switches every norm layer changes it
INSTANCE = nn.InstanceNorm1d


class _MixedNorms(nn.Module):
    """04.3's model: every BatchNorm kind a freeze must find — BatchNorm1d, BatchNorm2d (over a
    2 × 2 × 2 view of the features) and SyncBatchNorm (plain BatchNorm without a process group) —
    with dropout after the first and the last, and an InstanceNorm1d with running statistics (over
    a 2 × 4 view) that must keep its training mode."""

    def __init__(self, dropout: float | None):
        super().__init__()
        drop = (lambda: nn.Dropout(dropout)) if dropout else nn.Identity
        self.inner = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Tanh(), drop())
        self.image = nn.BatchNorm2d(2)
        self.instance = INSTANCE(2, track_running_stats=True)
        self.outer = nn.Sequential(
            nn.Linear(8, 8), nn.SyncBatchNorm(8), nn.Tanh(), drop(), nn.Linear(8, 3)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inner(x)
        h = self.image(h.reshape(len(h), 2, 2, 2)).reshape(len(h), 8)
        h = self.instance(h.reshape(len(h), 2, 4)).reshape(len(h), 8)
        return self.outer(h)


def model_with_statistics(dropout: float | None) -> nn.Module:
    """04.3's model with running statistics, scales and shifts that are not the initial 0, 1, 1,
    0: BatchNorm in eval mode is then visibly different from an identity."""
    from ..models import seeded

    with seeded(0):
        model = _MixedNorms(dropout).double()
    g = torch.Generator().manual_seed(40)
    with torch.no_grad():
        for bn in (m for m in model.modules() if isinstance(m, BATCHNORM)):
            shape = bn.running_mean.shape
            bn.running_mean.copy_(torch.randn(shape, generator=g, dtype=torch.float64))
            bn.running_var.copy_(0.5 + torch.rand(shape, generator=g, dtype=torch.float64))
            bn.weight.copy_(0.5 + torch.rand(shape, generator=g, dtype=torch.float64))
            bn.bias.copy_(torch.randn(shape, generator=g, dtype=torch.float64))
        # running statistics far from each sample's own: eval mode visibly differs
        model.instance.running_mean.copy_(torch.tensor([1.5, -1.0], dtype=torch.float64))
        model.instance.running_var.copy_(torch.tensor([3.0, 0.4], dtype=torch.float64))
    return model
