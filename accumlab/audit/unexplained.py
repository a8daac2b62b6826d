"""The 'unexplained' finding: steps no combination of the known bugs reproduces, with what the
measured difference looks like (lesson 08). Two shapes get a hint in words:

- the same direction as the reference, only another length (cosine 1 to rounding): every item
  of the window got the same weight, but the weights do not add up to 1, so the number the loss is
  divided by is off: a constant factor when the ratio is the same at every step; a count of the
  padding positions too when the ratios are the windows' real tokens / all positions;
- a small difference in nearly the same direction: the rounding of a lower precision than the
  model's (autocast), which a looser `rtol` accepts.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .findings import Finding
from .gradients import GradientResult, StepMatch
from .messages import message
from .phrases import phrase
from .recording import Recording
from .spec import MAX_RTOL, RTOL_BY_DTYPE, Setup

PARALLEL = 1e-8  # 1 − cosine below this: the same direction, to rounding
ROUNDING = RTOL_BY_DTYPE[torch.bfloat16]  # bfloat16's tolerance: its rounding moves a gradient less
NEAR = 1e-4  # 1 − cosine below this, with a difference under ROUNDING: looks like rounding
EPSILON = 1.5  # |ratio − 1| up to this × 1e-6 / ‖g‖ under clipping: the clip's epsilon, no more
EPSILON_ONLY = "only clip_grad_norm_'s epsilon differs"  # evidence key: clipping done another way
RTOL_STEPS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 2e-2, MAX_RTOL)  # tolerances a hint may suggest


def cosine(m: StepMatch) -> float:
    a, b = m.seen, m.expected
    denom = float(a.norm()) * float(b.norm())
    return float(a @ b) / denom if denom else math.nan


def _has_dropout(model: nn.Module) -> bool:
    return any(
        isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 and m.training
        for m in model.modules()
    )


def _padding_fractions(ms: list[StepMatch], setup: Setup) -> list[float] | None:
    """Real items / all positions of each step's window, when the loss counts fewer items than
    its targets have positions (token data with padding)."""
    out = []
    for m in ms:
        targets = [setup.batch(b).y for b in m.window[m.own :]]
        items = sum(setup.loss.count(y) for y in targets)
        positions = sum(y.numel() for y in targets)
        out.append(items / positions)
    return out if any(f < 1 for f in out) else None


def _clipping_epsilon(ms: list[StepMatch]) -> bool:
    """Clipping bit at every step and the lengths differ only at clip_grad_norm_'s 1e-6 epsilon:
    clipping done another way (by hand, or on scaled gradients with a scaled max_norm), not a
    normaliser, which clipping to max_norm hides."""
    # clip_grad_norm_ gives max_norm · ‖g‖ / (‖g‖ + 1e-6): a clip without the epsilon is longer
    # by a factor 1 + 1e-6 / ‖g‖ at most, ‖g‖ the norm before clipping
    return all(
        m.saturated and abs(m.ratio - 1) <= EPSILON * 1e-6 / float(m.reference.norm()) for m in ms
    )


def _scale_hint(ms: list[StepMatch], setup: Setup) -> str:
    ratios = [m.ratio for m in ms]
    if _clipping_epsilon(ms):
        worst = max(m.diff.rel_l2 for m in ms)
        return phrase("clipping_epsilon", rel=worst, max_norm=setup.max_norm) + "."
    detail = ""
    if max(ratios) - min(ratios) <= 1e-6 * max(ratios):
        detail = phrase("constant_factor", factor=ratios[0])
    fractions = _padding_fractions(ms, setup)
    if fractions and all(abs(r - f) <= 1e-6 * f for r, f in zip(ratios, fractions, strict=True)):
        detail = phrase("counts_padding", fractions=[round(f, 4) for f in fractions])
    cosines = min(cosine(m) for m in ms)
    words = phrase("same_direction", cosine=cosines, ratios=[round(r, 4) for r in ratios])
    return words + detail + "."


def _rounding_hint(ms: list[StepMatch], setup: Setup, dtype: str) -> str:
    worst = max(m.diff.rel_l2 for m in ms)
    suggest = next(r for r in RTOL_STEPS if r >= 2 * worst)
    return phrase(
        "rounding", rel=worst, cosine=min(cosine(m) for m in ms), dtype=dtype, suggest=suggest
    )


def hint(ms: list[StepMatch], setup: Setup) -> str:
    """What the differences look like, in words ('' when they look like nothing in particular)."""
    cosines = [cosine(m) for m in ms]
    if any(math.isnan(c) for c in cosines):
        return ""
    if all(1 - c <= PARALLEL for c in cosines):
        return _scale_hint(ms, setup)
    worst = max(m.diff.rel_l2 for m in ms)
    if worst <= ROUNDING and all(1 - c <= NEAR for c in cosines):
        dtypes = [p.dtype for p in setup.model.parameters() if p.is_floating_point()]
        return _rounding_hint(ms, setup, str(dtypes[0]).removeprefix("torch."))
    return ""


def unexplained_finding(
    ms: list[StepMatch], result: GradientResult, rec: Recording, setup: Setup
) -> Finding:
    first = ms[0]
    compared = sum(c.rel_error is not None for c in result.checks)
    why = phrase("dropout") if _has_dropout(setup.model) else ""
    why += phrase("modified") if rec.modified else ""
    plain = not why  # no dropout, no data changed in place: the difference is the loop's
    if plain:
        why = hint(ms, setup)
    text = message(
        "UNEXPLAINED_GRADIENT",
        count=len(ms),
        compared=compared,
        step=first.step,
        diff=first.diff,
        why=why,
    )
    evidence = {
        "steps": [m.step for m in ms],
        "‖seen‖ / ‖reference‖": [m.ratio for m in ms],
        "relative L2 difference": [m.diff.rel_l2 for m in ms],
        "cosine": [cosine(m) for m in ms],
    }
    if plain and all(1 - cosine(m) <= PARALLEL for m in ms) and _clipping_epsilon(ms):
        evidence[EPSILON_ONLY] = True
    return Finding("UNEXPLAINED_GRADIENT", text, evidence, tuple(m.step for m in ms))
