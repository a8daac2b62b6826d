"""What the reference does for an audit: windows of k micro-batches, the step positions, the
learning-rate schedule the audit hands in (lesson 08)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ..data import Data
from ..losses import Loss


def lr_factor(step: int) -> float:
    """The audit's learning-rate schedule: a strictly decreasing factor, so a scheduler stepped too
    often or too rarely shows up in the learning rate of the very first optimizer step it affects."""
    return 1.0 / (1.0 + step)


@dataclass(frozen=True)
class Setup:
    """What the reference does: micro-batches in order, windows of k, the short last window averaged
    over what it holds, every item of a window weighted equally, clipping once before the step."""

    model: nn.Module
    batches: list[Data]
    k: int
    loss: Loss
    lr: float
    max_norm: float | None = None
    scheduler: bool = False
    scaler: bool = False
    rtol: float = 1e-6

    @property
    def windows(self) -> list[tuple[int, ...]]:
        n = len(self.batches)
        return [tuple(range(i, min(i + self.k, n))) for i in range(0, n, self.k)]

    @property
    def positions(self) -> list[int]:
        """Micro-batches forwarded when each reference optimizer step happens."""
        return [w[-1] + 1 for w in self.windows]
