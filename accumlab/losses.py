"""Losses that report a sum and a count, so a loop can choose how to normalise (lesson 03)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .data import IGNORE_INDEX


@dataclass(frozen=True)
class Loss:
    """`loss(pred, target)` → (sum of per-item losses, number of items).

    An item is one target element for MSE, one labelled sample or real token for cross-entropy.
    sum / count equals PyTorch's `reduction="mean"` for the same batch.
    """

    name: str

    def __call__(self, pred: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, int]:
        return self.sum(pred, target), self.count(target)

    def sum(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.name == "mse":
            return F.mse_loss(pred, target, reduction="sum")
        return F.cross_entropy(
            pred.reshape(-1, pred.shape[-1]),
            target.reshape(-1),
            reduction="sum",
            ignore_index=IGNORE_INDEX,
        )

    def count(self, target: torch.Tensor) -> int:
        if self.name == "mse":
            return target.numel()
        return int((target != IGNORE_INDEX).sum())


LOSSES = {"mse": Loss("mse"), "cross_entropy": Loss("cross_entropy")}


def get_loss(loss: str | Loss) -> Loss:
    if isinstance(loss, Loss):
        return loss
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(map(repr, LOSSES))}, got {loss!r}")
    return LOSSES[loss]
