"""Detector: when the optimizer stepped, against the reference's windows and the stated policy for
a short last window (lesson 08)."""

from __future__ import annotations

from .findings import Finding
from .gradients import GradientResult
from .messages import message
from .phrases import WEIGHT_WORDS, phrase
from .recording import Recording
from .spec import Setup


def _weight_words(grads: GradientResult, step: int, k: int) -> str:
    """How the loop weighed the window of `step`, measured ('was divided by k = 4, ...')."""
    match = next((m for m in grads.matches if m.step == step), None)
    if match is None or match.chosen is None or "weights" not in match.chosen.how:
        return "its weight could not be measured"
    return WEIGHT_WORDS[match.chosen.how["weights"]].format(n=len(match.window), k=k)


def _leftover(rec: Recording, n: int) -> str:
    last = rec.steps[-1].position if rec.steps else 0
    if last >= n or rec.leftover_grad_norm == 0:
        return ""
    return phrase(
        "leftover", batches=list(range(last + 1, n + 1)), norm=rec.leftover_grad_norm
    ).replace("Micro-batch(es) ", "Micro-batch(es) (counting from 1) ")


def schedule_findings(rec: Recording, setup: Setup, grads: GradientResult) -> list[Finding]:
    n, k = len(setup.batches), setup.k
    expected = setup.positions
    seen = [s.position for s in rec.steps]
    windows = [s.window for s in rec.steps]
    evidence = {"steps after micro-batches (seen)": seen, "reference": expected}
    if seen == expected and windows == setup.reference_windows:
        return []
    if k > 1 and seen == list(range(1, n + 1)):
        text = message(
            "STEP_EVERY_MICRO_BATCH",
            seen=len(seen),
            micro_batches=n,
            expected=len(expected),
            k=k,
            weight=_weight_words(grads, 0, k).replace("a full window", "a full window's"),
        )
        return [Finding("STEP_EVERY_MICRO_BATCH", text, evidence)]
    every = setup.windows
    if setup.short_last and setup.last_window != "drop" and windows == every[:-1]:
        return [_dropped(rec, setup, evidence)]
    if setup.short_last and setup.last_window == "drop" and windows == every:
        text = message(
            "LAST_WINDOW_KEPT",
            size=len(every[-1]),
            weight="its loss " + _weight_words(grads, len(every) - 1, k),
        )
        return [Finding("LAST_WINDOW_KEPT", text, evidence, (len(every) - 1,))]
    body = seen[:-1] if len(seen) > 1 and seen[-1] == n and seen[-1] - seen[-2] != k else seen
    regular = len(body) >= 2 and all(b - a == k for a, b in zip(body, body[1:], strict=False))
    if k > 1 and regular and body[0] != k:
        shift = body[0] - k
        first = len(windows[0])
        text = message(
            "OFF_BY_ONE_SCHEDULE",
            seen=seen,
            expected=expected,
            shift=f"{abs(shift)} micro-batch(es) ({'early' if shift < 0 else 'late'})",
            seen0=[p - 1 for p in seen],
            expected0=[p - 1 for p in expected],
            k=k,
            first=phrase("first_window", size=first, weight=_weight_words(grads, 0, k)),
            leftover=_leftover(rec, n),
        )
        return [Finding("OFF_BY_ONE_SCHEDULE", text, evidence)]
    text = message(
        "UNEXPLAINED_SCHEDULE",
        seen=seen,
        expected=expected,
        windows=[list(w) for w in windows][:6],
        leftover=_leftover(rec, n),
    )
    return [Finding("UNEXPLAINED_SCHEDULE", text, evidence)]


def _dropped(rec: Recording, setup: Setup, evidence: dict) -> Finding:
    tail = setup.windows[-1]
    forwarded = set(rec.forwards) >= set(tail)
    samples = sum(len(setup.batches[i]) for i in tail)
    total = sum(len(b) for b in setup.batches)
    how = (
        "their gradients were computed, then never used by an optimizer step"
        if forwarded
        else "they were never forwarded"
    )
    leftover = ""
    if forwarded and rec.leftover_grad_norm > 0:
        zeroed = (
            "your loop zeroes before its first backward, so a next epoch would discard it"
            if rec.zero_grads and rec.zero_grads[0] == 0
            else "nothing in your loop zeroes it before the first backward, so a next epoch's "
            "first step would add it"
        )
        scales = [scale for method, _, scale in rec.scaler_calls if method == "scale"]
        scaled = (
            f", as stored: still multiplied by the GradScaler's scale {scales[-1]:g}"
            if scales
            else ""
        )
        leftover = phrase(
            "leftover_kept", norm=rec.leftover_grad_norm, scaled=scaled, zeroed=zeroed
        )
    text = message(
        "LAST_WINDOW_DROPPED",
        size=len(tail),
        samples=samples,
        how=how,
        used=total - samples,
        total=total,
        leftover=leftover,
        policy="drop",
    )
    evidence = {
        **evidence,
        "samples left out per epoch": samples,
        "gradient left in .grad (norm)": rec.leftover_grad_norm,
    }
    return Finding("LAST_WINDOW_DROPPED", text, evidence, ())
