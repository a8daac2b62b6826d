"""Detector: optimizer steps a GradScaler loop took with optimizer.step() instead of
scaler.step(optimizer) (lesson 08).

The update can still have the right size (unscale_ divided the gradients first), so the gradient
check sees nothing; what is lost is GradScaler.step's inf/NaN check, which skips the update when
a scaled gradient overflowed. The scaler log shows it: no scaler.step call before that step.

The opposite, a note: steps scaler.step skipped because their scaled gradients overflowed (the
instruments log them as steps whose parameters did not move), what the GradScaler is for.
"""

from __future__ import annotations

from collections import Counter

from .findings import Finding
from .gradients import GradientResult
from .messages import message
from .phrases import phrase
from .recording import Recording
from .scaler_log import segments
from .spec import Setup

HOW = {
    "unscaled": " (unscale_ ran first, so the update had the right size)",
    "unused": " (the GradScaler was never called: the losses were not scaled either)",
    "mixed": "",
}


def _skipped(rec: Recording) -> list[Finding]:
    """Steps scaler.step skipped for an overflow: a note, with the scale at each."""
    skipped = [s for s in rec.steps if s.skipped]
    if not skipped:
        return []
    warning = next((w for w in rec.warnings if "lr_scheduler.step()" in w), "")
    scheduled = phrase("warned_skip", warning=warning.split(". ")[0]) if warning else ""
    text = message(
        "SCALER_SKIPPED_STEPS",
        steps=[s.index for s in skipped],
        total=len(rec.steps),
        scales=", ".join(f"{s.scale:g}" for s in skipped),
        scheduled=scheduled,
    )
    evidence = {
        "skipped steps": [s.index for s in skipped],
        "scale at each": [s.scale for s in skipped],
    }
    return [Finding("SCALER_SKIPPED_STEPS", text, evidence, tuple(s.index for s in skipped))]


def scaler_step_findings(rec: Recording, setup: Setup, grads: GradientResult) -> list[Finding]:
    if not setup.scaler or not rec.steps:
        return []
    return _skipped(rec) + _bypassed(rec, grads)


def _bypassed(rec: Recording, grads: GradientResult) -> list[Finding]:
    calls = segments(rec)[: len(rec.steps)]
    # a step whose gradient was still scaled is SCALER_MISUSE's ("not_unscaled"): said there
    misused = {m.step for m in grads.matches if "SCALER_MISUSE" in m.codes}
    bypassed = [
        i
        for i, segment in enumerate(calls)
        if i not in misused and not any(method == "step" for method, _ in segment)
    ]
    if not bypassed:
        return []
    if all(any(method == "unscale_" for method, _ in calls[i]) for i in bypassed):
        how = "unscaled"
    elif not rec.scaler_calls:
        how = "unused"
    else:
        how = "mixed"
    text = message("SCALER_STEP_SKIPPED", steps=bypassed, unscaled=HOW[how])
    evidence = {
        "optimizer steps without scaler.step": bypassed,
        "GradScaler calls": dict(Counter(method for method, _, _ in rec.scaler_calls)),
    }
    return [Finding("SCALER_STEP_SKIPPED", text, evidence, tuple(bypassed))]
