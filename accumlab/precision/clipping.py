"""Gradient clipping under accumulation: clip the window's gradient once, or each micro-batch's
contribution on its own (lesson 06). Only the first matches what the full batch would clip.
"""

from __future__ import annotations

import torch
from torch import nn

from .._validate import one_of, positive_float, positive_int
from ..compare import grad_diff
from ..data import Data
from ..engine import CLIP_PLACEMENTS, Recipe, run


def _update(trace) -> dict[str, torch.Tensor]:
    return {n: trace.params[0][n] - trace.initial_params[n] for n in trace.initial_params}


def clipped_updates(
    model: nn.Module,
    data: Data,
    *,
    micro_batch_size: int,
    max_norm: float,
    placements: tuple[str, ...] = CLIP_PLACEMENTS,
    lr: float = 0.1,
    loss: str = "mse",
) -> dict:
    """One SGD step over all of `data` as one window, clipped at `max_norm`, per placement. Lesson 06.

    The reference is the full batch in one backward, clipped once. Returns {"full": update,
    "updates": {placement: update}, "diffs": {placement: GradDiff vs full}, "norms": {...}} where
    norms are the gradient norms clip_grad_norm_ saw (before clipping).
    """
    positive_int("micro_batch_size", micro_batch_size)
    positive_float("max_norm", max_norm)
    for p in placements:
        one_of("placements[...]", p, CLIP_PLACEMENTS)
    if len(data) % micro_batch_size:
        raise ValueError(
            f"len(data)={len(data)} must be a multiple of micro_batch_size={micro_batch_size}"
        )
    k = len(data) // micro_batch_size
    full = run(Recipe(len(data), 1, clip_norm=max_norm), model, data, loss=loss, lr=lr)
    out = {"full": _update(full), "full_norm": full.clip_norms[0], "k": k, "max_norm": max_norm}
    out["updates"], out["diffs"], out["norms"] = {}, {}, {}
    for placement in placements:
        recipe = Recipe(micro_batch_size, k, clip_norm=max_norm, clip_at=placement)
        trace = run(recipe, model, data, loss=loss, lr=lr, record_grads=False)
        out["updates"][placement] = _update(trace)
        out["diffs"][placement] = grad_diff(out["updates"][placement], out["full"])
        out["norms"][placement] = trace.clip_norms
    return out


def update_norm(update: dict[str, torch.Tensor]) -> float:
    """‖update‖ over every parameter, as one vector."""
    return float(sum(u.double().pow(2).sum() for u in update.values())) ** 0.5
