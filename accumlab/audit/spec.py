"""What the reference does for an audit: windows of k micro-batches over every epoch, the policy
for a short last window, the step positions, the match tolerance for the model's dtype, and the
learning-rate schedule the audit hands in (lesson 08)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..data import Data
from ..engine import LAST_WINDOW_POLICIES
from ..losses import Loss

# Relative L2 difference still called a match, by the model's dtype. A correct loop differs from
# the reference only by rounding: measured on lesson 08's regression model, about 1e-16 in float64,
# 4e-8 in float32, 3e-4 in float16 and 3e-3 in bfloat16 (tests/test_audit_hostile.py checks the margins).
RTOL_BY_DTYPE = {
    torch.float64: 1e-9,
    torch.float32: 1e-5,
    torch.float16: 3e-3,
    torch.bfloat16: 2e-2,
}
# Above this no tolerance is accepted: the gallery's bugs move the gradient by more (the mean of
# means by 0.33 relative, a last window weighted 2/4 by 0.5), and a bigger rtol would hide them.
MAX_RTOL = 0.05
# "carry": the short last window is not closed at the epoch's end but continues into the next
# epoch (a step counter that runs across epochs); the run's very last window is divided by what it
# holds. The other three are al.Recipe's.
POLICIES = (*LAST_WINDOW_POLICIES, "carry")
MAX_EPOCHS = 4  # two show what happens to a tail; every epoch re-runs every check


def default_rtol(model: nn.Module) -> float:
    dtypes = [p.dtype for p in model.parameters() if p.is_floating_point()]
    return RTOL_BY_DTYPE.get(dtypes[0] if dtypes else torch.float32, 1e-5)


def lr_factor(step: int) -> float:
    """The audit's learning-rate schedule: a strictly decreasing factor, so a scheduler stepped too
    often or too rarely shows up in the learning rate of the very first optimizer step it affects."""
    return 1.0 / (1.0 + step)


@dataclass(frozen=True)
class Setup:
    """What the reference does: micro-batches in order, epoch after epoch, windows of k, the short
    last window of each epoch treated as `last_window` says, every item of a window weighted
    equally, clipping once before the step. Micro-batches are numbered across the run: micro-batch
    b is `batches[b % n]` of epoch b // n."""

    model: nn.Module
    batches: list[Data]
    k: int
    loss: Loss
    lr: float
    max_norm: float | None = None
    scheduler: bool = False
    scaler: bool = False
    rtol: float = 1e-9
    last_window: str = "divide_by_actual"
    epochs: int = 1

    @property
    def n(self) -> int:
        """Micro-batches per epoch."""
        return len(self.batches)

    def batch(self, b: int) -> Data:
        return self.batches[b % self.n]

    @property
    def windows(self) -> list[tuple[int, ...]]:
        """Every window of the run, short ones included: per epoch, or across epochs ("carry")."""
        n, k = self.n, self.k
        if self.last_window == "carry":
            total = n * self.epochs
            return [tuple(range(i, min(i + k, total))) for i in range(0, total, k)]
        return [
            tuple(range(e * n + i, e * n + min(i + k, n)))
            for e in range(self.epochs)
            for i in range(0, n, k)
        ]

    @property
    def short_last(self) -> bool:
        """Each epoch ends inside a window: n is not a multiple of k."""
        return self.n % self.k != 0

    @property
    def reference_windows(self) -> list[tuple[int, ...]]:
        """The windows the reference steps on: each epoch's short last one is left out under "drop"."""
        if self.last_window == "drop":
            return [w for w in self.windows if len(w) == self.k]
        return self.windows

    @property
    def positions(self) -> list[int]:
        """Micro-batches forwarded (counted over the run) when each reference optimizer step happens."""
        return [w[-1] + 1 for w in self.reference_windows]

    def epoch_positions(self) -> list[int]:
        """The reference's step positions within one epoch (per-epoch policies)."""
        return [p for p in self.positions if p <= self.n]
