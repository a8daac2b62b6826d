"""Losses that report a sum and a count, so a loop can choose how to normalise (lesson 03)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ._validate import instance, one_of
from .data import IGNORE_INDEX

NAMES = ("mse", "cross_entropy")


@dataclass(frozen=True)
class Loss:
    """`loss(pred, target)` → (sum of per-item losses, number of items).

    An item is one target element for MSE, one labelled sample or real token for cross-entropy.
    sum / count equals PyTorch's `reduction="mean"` for the same batch.
    """

    name: str

    def __post_init__(self):
        one_of("loss", self.name, NAMES)  # any other name would silently mean cross-entropy

    def __call__(self, pred: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, int]:
        return self.sum(pred, target), self.count(target)

    def sum(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        self.check(pred, target)
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

    def check(self, pred: torch.Tensor, target: torch.Tensor) -> None:
        """The model's output and the targets fit this loss; said in the lesson's terms."""
        instance("pred (the model's output)", pred, torch.Tensor, "a tensor")
        instance("target (data.y)", target, torch.Tensor, "a tensor")
        shapes = f"the model's output has shape {_shape(pred)} and y has shape {_shape(target)}"
        if self.name == "mse":
            if pred.shape != target.shape:
                # the classic silent bug: (n, 1) against (n,) broadcasts to (n, n)
                raise ValueError(
                    f"{shapes}: MSE needs them equal. Broadcasting would compare every prediction "
                    f"with every target and give a wrong loss without an error; {_fix(pred, target)}"
                )
            if not target.is_floating_point():
                raise ValueError(
                    f"MSE needs real-valued targets, got y of dtype {target.dtype} (class labels: "
                    "use loss='cross_entropy')"
                )
            return
        if target.is_floating_point() or target.dtype == torch.bool:
            raise ValueError(
                f"cross_entropy needs integer class labels in y, got y of dtype {target.dtype} "
                "(real-valued targets: use loss='mse')"
            )
        if pred.dim() < 2 or pred.shape[:-1] != target.shape:
            raise ValueError(
                f"{shapes}: cross_entropy needs an output of shape y.shape + (classes,), one score "
                "per class for every label"
            )
        classes = pred.shape[-1]
        labels = target[target != IGNORE_INDEX]
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= classes):
            bad = labels[(labels < 0) | (labels >= classes)][0]
            raise ValueError(
                f"y holds the label {int(bad)}, but the model scores {classes} classes "
                f"(labels 0..{classes - 1}; {IGNORE_INDEX} marks padding)"
            )


def _fix(pred: torch.Tensor, target: torch.Tensor) -> str:
    if pred.shape[-1:] == (1,) and pred.shape[:-1] == target.shape:
        return "give y a last dimension of 1: Data(x, y.reshape(-1, 1)) or y.unsqueeze(-1)"
    if target.shape[-1:] == (1,) and target.shape[:-1] == pred.shape:
        return "the model drops the last dimension: return output.unsqueeze(-1), or flatten y"
    return "make the model's number of outputs match y's last dimension"


def _shape(t: torch.Tensor) -> str:
    return str(tuple(t.shape))


LOSSES = {name: Loss(name) for name in NAMES}


def get_loss(loss: str | Loss) -> Loss:
    if isinstance(loss, Loss):
        return loss
    return LOSSES[one_of("loss", loss, NAMES)]
