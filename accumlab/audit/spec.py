"""What the reference does for an audit: windows of k micro-batches, the policy for a short last
window, the step positions, the match tolerance for the model's dtype, and the learning-rate
schedule the audit hands in (lesson 08)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..data import Data
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


def default_rtol(model: nn.Module) -> float:
    dtypes = [p.dtype for p in model.parameters() if p.is_floating_point()]
    return RTOL_BY_DTYPE.get(dtypes[0] if dtypes else torch.float32, 1e-5)


def lr_factor(step: int) -> float:
    """The audit's learning-rate schedule: a strictly decreasing factor, so a scheduler stepped too
    often or too rarely shows up in the learning rate of the very first optimizer step it affects."""
    return 1.0 / (1.0 + step)


@dataclass(frozen=True)
class Setup:
    """What the reference does: micro-batches in order, windows of k, the short last window treated
    as `last_window` says (as in `al.Recipe`), every item of a window weighted equally, clipping
    once before the step."""

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

    @property
    def windows(self) -> list[tuple[int, ...]]:
        """Every window of the epoch, the short last one included."""
        n = len(self.batches)
        return [tuple(range(i, min(i + self.k, n))) for i in range(0, n, self.k)]

    @property
    def short_last(self) -> bool:
        return len(self.windows[-1]) < self.k

    @property
    def reference_windows(self) -> list[tuple[int, ...]]:
        """The windows the reference steps on: a short last one is left out under "drop"."""
        windows = self.windows
        return windows[:-1] if self.last_window == "drop" and self.short_last else windows

    @property
    def positions(self) -> list[int]:
        """Micro-batches forwarded when each reference optimizer step happens."""
        return [w[-1] + 1 for w in self.reference_windows]
