"""How far apart two sets of gradients are (lesson 02+)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GradDiff:
    """max_abs: largest |a - b|; max_rel: max_abs / largest |b| (relative to the reference's scale,
    so tiny reference entries do not blow it up); rel_l2: ‖a − b‖ / ‖b‖; cosine: angle between them.

    A NaN or inf anywhere in a or b is a mismatch, never a match: max_abs, max_rel and rel_l2 are
    then inf (so `max_rel > tol` is True) and cosine is NaN (so `cosine > 0.999` is False);
    `finite` says which case this is. (Without this, NaN compares False with every tolerance and
    `max_rel > tol` would call a NaN gradient correct.)
    """

    max_abs: float
    max_rel: float
    rel_l2: float
    cosine: float
    finite: bool = True

    def __str__(self) -> str:
        if not self.finite:
            return "not comparable: NaN or inf in the gradients (counted as a mismatch)"
        return (
            f"max |Δ| = {self.max_abs:.3g}, max relative = {self.max_rel:.3g}, "
            f"relative L2 = {self.rel_l2:.3g}, cosine = {self.cosine:.6f}"
        )


def flatten(tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """One vector of a dict name → tensor, in name order, dtype and device kept: how lessons take
    norms, cosines and variances of whole gradients or parameter sets (any lesson)."""
    if not isinstance(tensors, dict) or not tensors:
        raise ValueError(
            f"tensors must be a non-empty dict of name -> tensor, got {type(tensors).__name__}"
        )
    for k, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"tensors[{k!r}] must be a tensor, got {type(t).__name__} {t!r:.60}")
    return torch.cat([tensors[k].reshape(-1) for k in sorted(tensors, key=str)])


def _flatten(grads, name: str) -> tuple[list[str], list[tuple[int, ...]], torch.Tensor]:
    if isinstance(grads, torch.Tensor):
        return [""], [tuple(grads.shape)], grads.detach().reshape(-1).double().cpu()
    if not isinstance(grads, dict) or not grads:
        raise ValueError(
            f"{name} must be a tensor or a non-empty dict of tensors, got {type(grads).__name__}"
        )
    keys = sorted(grads, key=str)
    for k in keys:
        if not isinstance(grads[k], torch.Tensor):
            raise ValueError(
                f"{name}[{k!r}] must be a tensor, got {type(grads[k]).__name__} {grads[k]!r:.60}"
            )
    flat = torch.cat([grads[k].detach().reshape(-1).double().cpu() for k in keys])
    return keys, [tuple(grads[k].shape) for k in keys], flat


def grad_diff(a, b) -> GradDiff:
    """Compare gradients `a` against the reference `b` (dicts name → tensor, or two tensors)."""
    ka, sa, fa = _flatten(a, "a")
    kb, sb, fb = _flatten(b, "b")
    if ka != kb:
        raise ValueError(f"a and b must name the same parameters, got {ka} and {kb}")
    for k, shape_a, shape_b in zip(ka, sa, sb, strict=True):
        if shape_a != shape_b:
            # (2,) against (2, 1) holds the same numbers but is not the same gradient: a loss
            # broadcast somewhere made one of them
            where = f" for {k!r}" if k else ""
            raise ValueError(
                f"a and b must have the same sizes{where}, got shapes {shape_a} and {shape_b}"
            )
    if not (bool(torch.isfinite(fa).all()) and bool(torch.isfinite(fb).all())):
        inf = math.inf
        return GradDiff(max_abs=inf, max_rel=inf, rel_l2=inf, cosine=math.nan, finite=False)
    diff = fa - fb
    max_abs = float(diff.abs().max()) if diff.numel() else 0.0
    scale = float(fb.abs().max()) if fb.numel() else 0.0
    norm_b = float(fb.norm())
    denom = float(fa.norm()) * norm_b
    return GradDiff(
        max_abs=max_abs,
        max_rel=max_abs / scale if scale else (0.0 if max_abs == 0 else math.inf),
        rel_l2=float(diff.norm()) / norm_b if norm_b else (0.0 if max_abs == 0 else math.inf),
        cosine=float(fa @ fb) / denom if denom else math.nan,
    )
