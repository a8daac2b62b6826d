"""Lesson 13: "accumulation reduces gradient variance" — measured. The accumulated gradient IS the
big-batch gradient, so its variance over random batches is the big batch's: lower than one
micro-batch's, never lower than the batch it emulates."""

from __future__ import annotations

import torch
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import positive_int
from ..compare import flatten, grad_diff
from ..data import Data
from ..reference import accumulated_grads, full_batch_grads


@one_thread()
def gradient_variance(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    draws: int = 100,
    seed: int = 0,
    loss: str = "mse",
) -> dict:
    """Draw `draws` random batches of micro_batch_size × k samples from `data` (without replacement
    within a batch) and compute, for each: the gradient of its first micro-batch alone, the gradient
    accumulated over its k micro-batches (loss / k), and one full-batch gradient over it.

    Returns {"micro", "accumulated", "big"}: the total variance (sum over parameters of the variance
    across draws) of each; and "max_rel": the largest gap between the accumulated and the big-batch
    gradient over all draws. Lesson 13.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    k = positive_int("accumulation_steps", accumulation_steps)
    draws = positive_int("draws", draws, minimum=2)
    # per draw: one micro-batch, k accumulated micro-batches and one full batch
    _validate.within_max_steps(f"draws × (k + 2) passes = {draws} × {k + 2}", draws * (k + 2))
    seed = _validate.seed("seed", seed)
    window = micro_batch_size * k
    if window > len(data):
        raise ValueError(
            f"micro_batch_size × accumulation_steps = {window} exceeds the {len(data)} samples"
        )
    g = torch.Generator().manual_seed(seed)
    rows = {"micro": [], "accumulated": [], "big": []}
    max_rel = 0.0
    for _ in range(draws):
        batch = data[torch.randperm(len(data), generator=g)[:window]]
        micro = full_batch_grads(model, batch[:micro_batch_size], loss=loss)
        acc = accumulated_grads(model, batch, micro_batch_size, loss=loss)
        big = full_batch_grads(model, batch, loss=loss)
        max_rel = max(max_rel, grad_diff(acc, big).max_rel)
        for name, grads in (("micro", micro), ("accumulated", acc), ("big", big)):
            rows[name].append(flatten(grads))
    out = {name: float(torch.stack(v).var(0).sum()) for name, v in rows.items()}
    out["max_rel"] = max_rel
    return out
