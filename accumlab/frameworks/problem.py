"""The two tiny problems every framework runs in lesson 11, and the reference each step must match.

The same sizes as lesson 08's audit: 40 regression samples in micro-batches of 4, and 20 padded
token sequences in micro-batches of 2 — ten micro-batches each, so k = 3 or 4 leaves a short last
window (k = 4: windows of 4, 4 and 2 micro-batches). Everything is float64 so that "exact" means
equal to round-off, and everything is built from a seed, so every run starts from the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .._validate import instance, one_of, positive_float, positive_int, sequence
from ..data import Data, regression_data, token_data
from ..losses import Loss, get_loss
from ..models import TinyLM, mlp

DATASETS = ("regression", "tokens")
MAX_K = 10  # ten micro-batches: a larger k would never fill one window


@dataclass(frozen=True)
class Problem:
    """One run's task: data, micro-batches, k, loss, learning rate. Lesson 11."""

    data_name: str
    data: Data
    micro_batch_size: int
    accumulation_steps: int
    loss_name: str
    lr: float = 0.1
    dtype: torch.dtype = torch.float64

    @property
    def k(self) -> int:
        return self.accumulation_steps

    @property
    def loss(self) -> Loss:
        return get_loss(self.loss_name)

    def model(self) -> nn.Module:
        """A fresh model, the same weights every call."""
        if self.data_name == "tokens":
            return TinyLM(vocab=16, dim=8, seed=0, dtype=self.dtype)
        return mlp(features=4, hidden=8, depth=1, seed=0, dtype=self.dtype)

    def micro_batches(self) -> list[Data]:
        return self.data.micro_batches(self.micro_batch_size)

    def windows(self) -> list[tuple[int, ...]]:
        """Micro-batch indices of each optimizer step one big batch per window would take."""
        n, k = len(self.micro_batches()), self.k
        return [tuple(range(i, min(i + k, n))) for i in range(0, n, k)]

    def window_data(self, window: tuple[int, ...]) -> Data:
        """The samples of the micro-batches `window` names (indices into `micro_batches()`)."""
        batches = self.micro_batches()
        window = [
            positive_int(f"window[{i}]", j, minimum=0, maximum=len(batches) - 1,
                         why=f"an index into the {len(batches)} micro-batches")
            for i, j in enumerate(sequence("window", window))
        ]  # fmt: skip
        return Data(
            torch.cat([batches[i].x for i in window]), torch.cat([batches[i].y for i in window])
        )

    def mean_loss(self, pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """What most training code writes: the micro-batch MEAN (real tokens only for tokens)."""
        loss_sum, count = self.loss(pred, y)
        return loss_sum / count

    def sum_loss(self, pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.loss.sum(pred, y)

    def items(self, y: torch.Tensor) -> int:
        """Items a loss averages over: target values (regression) or real tokens."""
        return self.loss.count(instance("y", y, torch.Tensor, "a tensor (a micro-batch's y)"))


def make_problem(
    data: str = "regression",
    k: int = 4,
    *,
    lr: float = 0.1,
    dtype: torch.dtype = torch.float64,
    seed: int = 0,
) -> Problem:
    """The lesson's problem `data` ("regression" or "tokens") with k accumulation steps, in float64
    (or float32, for DeepSpeed). `seed` draws the token lengths (the lesson's: 0; the exercises
    also check an answer on another); the regression data and every model stay seed 0. Lesson 11."""
    one_of("data", data, DATASETS)
    seed = positive_int("seed", seed, minimum=0)
    k = positive_int("k", k)
    if k > MAX_K:
        raise ValueError(
            f"k must be at most {MAX_K} (the problems have {MAX_K} micro-batches), got {k}"
        )
    lr = positive_float("lr", lr)
    if dtype not in (torch.float64, torch.float32):
        raise ValueError(f"dtype must be torch.float64 or torch.float32, got {dtype!r}")
    if data == "tokens":
        # 1 to 12 real tokens per sequence: micro-batches hold very different token counts
        tokens = token_data(n=20, min_len=1, max_len=12, vocab=16, seed=seed)
        return Problem("tokens", tokens, 2, k, "cross_entropy", float(lr), dtype)
    reg = regression_data(n=40, features=4, seed=0)
    reg = Data(reg.x.to(dtype), reg.y.to(dtype))  # the same values, rounded for a float32 run
    return Problem("regression", reg, 4, k, "mse", float(lr), dtype)
