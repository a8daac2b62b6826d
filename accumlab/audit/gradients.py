"""Detector: the gradient each optimizer step saw, against the reference and against every
combination of known bugs (lesson 08).

At each step the combinations whose prediction lies within `rtol` of the measured gradient are
candidates. Predictions that coincide (a bug with no effect on this data: equal micro-batches make
the mean of means exact) are one explanation, named by the fewest codes. When candidates that
differ remain, the best one is taken only if it matches at least 100 times better than the next;
otherwise the step is reported as not verifiable, with what could be told apart and what could not.
Where clipping shortened the reference, a bug that only scales the gradient gives the same update:
such a bug stays possible unless a prediction without it fits clearly better. Where two different
bugs give the very same gradient at one step (a loss divided twice by n = 2 and a window of 2
divided by k = 4), the one the other steps established is taken.

A window that began in an earlier epoch (the previous epoch's last micro-batches were forwarded
after its last step) is compared with the part the reference has: what this epoch forwarded when
the reference closed or dropped the earlier part, all of it when its windows run across epochs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch

from ..compare import grad_diff
from .findings import StepCheck
from .hypotheses import (
    Context,
    Hypothesis,
    expected,
    hypotheses,
    ratio,
    reference_part,
    vec,
    window_grads,
)
from .recording import Recording
from .scaler_log import replay, segments
from .spec import Setup

SAME = 1e-10  # predictions closer than this (relative) are the same gradient
# Codes that change only the gradient's length: clipping that bites hides them.
SCALE_ONLY = frozenset(
    {"LOSS_NOT_DIVIDED", "LAST_WINDOW_UNDERWEIGHTED", "LAST_WINDOW_AVERAGED", "SCALER_MISUSE"}
)
CLEARLY_BETTER = 100.0  # how much better the best match must be than a differing candidate
FLOOR = 1e-13  # errors below this are rounding, whatever their ratio


@dataclass
class StepMatch:
    """How one step compared: the explanation taken, and what else also fitted."""

    step: int
    window: tuple
    aligned: bool
    seen: torch.Tensor
    reference: torch.Tensor  # the window's item-weighted mean gradient, before clipping
    expected: torch.Tensor  # what the reference loop's optimizer sees (the policy, clipping)
    counts: list[int]
    rel_error: float  # ‖seen − expected‖ / ‖expected‖
    chosen: Hypothesis | None  # None: nothing within rtol
    codes: frozenset[str] = frozenset()  # codes every fitting explanation agrees on
    uncertain: frozenset[str] = frozenset()  # codes some fitting explanations have, others not
    saturated: bool = False  # clipping shortened the reference: the loss scale is hidden
    scale: float | None = None
    mults: list[float] | None = None  # GradScaler replay: each micro-batch's net multiplier
    whole: torch.Tensor | None = None  # the item-weighted mean over every micro-batch of `window`
    carried: int = 0  # micro-batches of `window` forwarded in an earlier epoch
    own: int = 0  # where the reference's window starts in `window`
    alternatives: tuple[Hypothesis, ...] = ()  # explanations giving the chosen one's very gradient

    @property
    def ratio(self) -> float:
        """‖seen‖ / ‖expected‖: against what the reference loop's optimizer sees (clipped, the
        stated policy applied), the reference the lesson defines; not the unclipped mean."""
        return ratio(self.seen, self.expected)

    @property
    def diff(self):
        return grad_diff(self.seen, self.expected)


@dataclass
class GradientResult:
    matches: list[StepMatch] = field(default_factory=list)
    checks: list[StepCheck] = field(default_factory=list)
    first: dict = field(default_factory=dict)  # first aligned step and its window (BatchNorm)


def _distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖a − b‖ relative to the longer of the two: symmetric, at most 2, and a gradient clipped to a
    tiny norm is judged at its own size, not the reference's. Two zero vectors are at distance 0."""
    longer = max(float(a.norm()), float(b.norm()))
    return float((a - b).norm()) / longer if longer else 0.0


def _decide(seen: torch.Tensor, hyps: list[Hypothesis], rtol: float, saturated: bool):
    errors = [_distance(seen, h.predicted) for h in hyps]
    fitting = sorted((e, i) for i, e in enumerate(errors) if e <= rtol)
    if not fitting:
        return None, frozenset(), frozenset(), ()
    groups: list[list[tuple[float, int]]] = []  # fitting hypotheses with the same prediction
    for e, i in fitting:
        for g in groups:
            if _distance(hyps[i].predicted, hyps[g[0][1]].predicted) <= SAME:
                g.append((e, i))
                break
        else:
            groups.append([(e, i)])
    picks = [min(g, key=lambda ei: (len(hyps[ei[1]].codes), ei[1])) for g in groups]
    best_error = groups[0][0][0]
    rivals = [
        hyps[p[1]]
        for p, g in zip(picks[1:], groups[1:], strict=True)
        if g[0][0] < CLEARLY_BETTER * max(best_error, FLOOR)
    ]
    chosen = hyps[picks[0][1]]
    every = [chosen.codes, *(h.codes for h in rivals)]
    if saturated and chosen.how.get("clip") == "window":
        # clipping made scale bugs give this very gradient: they stay possible
        hidden = {c for _, i in groups[0] for c in hyps[i].codes & SCALE_ONLY} - chosen.codes
        every += [chosen.codes | {c} for c in hidden]
    same = tuple(hyps[i] for _, i in groups[0])
    if len(every) == 1:
        return chosen, chosen.codes, frozenset(), same
    agreed = frozenset.intersection(*every)
    return chosen, agreed, frozenset.union(*every) - agreed, same


def _alignment(window: tuple, carried: int, references: set) -> tuple[bool, int]:
    """(aligned, own): whether the reference has this window, or the part of it this epoch
    forwarded (then `own` is where that part starts)."""
    if window in references:
        return True, 0
    if carried and window[carried:] in references:
        return True, carried
    return False, 0


def _consistent(matches: list[StepMatch]) -> None:
    """Where several explanations give one step's very gradient, take the one other steps
    established (they were told apart there) over the one with the fewest codes."""
    ambiguous = [m for m in matches if len({h.codes for h in m.alternatives}) > 1]
    established = set().union(*(m.codes for m in matches if m.chosen and m not in ambiguous))
    for m in ambiguous:
        if m.codes <= established:
            continue
        for h in sorted(m.alternatives, key=lambda h: len(h.codes)):
            if h.codes and h.codes <= established:
                m.chosen, m.codes = h, h.codes
                break


def gradient_matches(rec: Recording, setup: Setup) -> GradientResult:
    names = [n for n, _ in setup.model.named_parameters()]
    references = set(setup.reference_windows)
    probe = copy.deepcopy(setup.model)
    scaler_segments = segments(rec) if setup.scaler else None
    out = GradientResult()
    previous = None
    compared = {}  # step index -> its StepMatch
    for step in rec.steps:
        seen = vec(step.grads, names)
        if None in step.window or not step.window or not torch.isfinite(seen).all():
            previous = seen
            continue
        w = window_grads(probe, step, setup, names)
        if not torch.isfinite(w.means).all():  # NaN data or parameters: NON_FINITE says where
            previous = seen
            continue
        carried = sum(b // setup.n < step.epoch for b in step.window)
        aligned, own = _alignment(step.window, carried, references)
        replayed = (
            replay(scaler_segments[step.index], len(step.window))
            if scaler_segments is not None and step.index < len(scaler_segments)
            else None
        )
        ctx = Context(
            k=setup.k,
            max_norm=setup.max_norm,
            aligned=aligned,
            stated=setup.last_window,
            previous=previous,
            scale=step.scale,
            replay=replayed,
            carried=carried,
            own=own,
        )
        hyps = hypotheses(w, ctx)
        reference = expected(w, ctx)
        part = reference_part(w, ctx).reference
        norm = float(reference.norm()) or float(part.norm()) or 1.0
        saturated = setup.max_norm is not None and float(part.norm()) > setup.max_norm
        chosen, codes, uncertain, same = _decide(seen, hyps, setup.rtol, saturated)
        rel = float((seen - reference).norm()) / norm
        match = StepMatch(
            step.index,
            step.window,
            aligned,
            seen,
            part,
            reference,
            reference_part(w, ctx).counts,
            rel,
            chosen,
            codes,
            uncertain,
            saturated,
            step.scale,
            replayed[0] if replayed else None,
            w.reference,
            carried,
            own,
            same,
        )
        out.matches.append(match)
        compared[step.index] = match
        if aligned and not out.first:
            out.first = {"step": step, "window": w}
        previous = seen
    _consistent(out.matches)
    for step in rec.steps:
        m = compared.get(step.index)
        if m is None:
            out.checks.append(StepCheck(step.index, step.window, None))
            continue
        explained = "+".join(sorted(m.codes | m.uncertain)) or None
        out.checks.append(
            StepCheck(m.step, m.window, m.rel_error if m.aligned else None, explained)
        )
    return out
