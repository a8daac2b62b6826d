"""How far apart two sets of gradients are (lesson 02+)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GradDiff:
    """max_abs: largest |a - b|; max_rel: max_abs / largest |b| (relative to the reference's scale,
    so tiny reference entries do not blow it up); rel_l2: ‖a − b‖ / ‖b‖; cosine: angle between them."""

    max_abs: float
    max_rel: float
    rel_l2: float
    cosine: float

    def __str__(self) -> str:
        return (
            f"max |Δ| = {self.max_abs:.3g}, max relative = {self.max_rel:.3g}, "
            f"relative L2 = {self.rel_l2:.3g}, cosine = {self.cosine:.6f}"
        )


def _flatten(grads, name: str) -> tuple[list[str], torch.Tensor]:
    if isinstance(grads, torch.Tensor):
        return [""], grads.detach().reshape(-1).double()
    if not isinstance(grads, dict) or not grads:
        raise ValueError(
            f"{name} must be a tensor or a non-empty dict of tensors, got {type(grads).__name__}"
        )
    keys = sorted(grads)
    return keys, torch.cat([grads[k].detach().reshape(-1).double().cpu() for k in keys])


def grad_diff(a, b) -> GradDiff:
    """Compare gradients `a` against the reference `b` (dicts name → tensor, or two tensors)."""
    ka, fa = _flatten(a, "a")
    kb, fb = _flatten(b, "b")
    if ka != kb:
        raise ValueError(f"a and b must name the same parameters, got {ka} and {kb}")
    if fa.shape != fb.shape:
        raise ValueError(
            f"a and b must have the same sizes, got {tuple(fa.shape)} and {tuple(fb.shape)}"
        )
    diff = fa - fb
    max_abs = float(diff.abs().max())
    scale = float(fb.abs().max())
    norm_b = float(fb.norm())
    denom = float(fa.norm()) * norm_b
    return GradDiff(
        max_abs=max_abs,
        max_rel=max_abs / scale if scale else (0.0 if max_abs == 0 else float("inf")),
        rel_l2=float(diff.norm()) / norm_b if norm_b else (0.0 if max_abs == 0 else float("inf")),
        cosine=float(fa @ fb) / denom if denom else float("nan"),
    )
