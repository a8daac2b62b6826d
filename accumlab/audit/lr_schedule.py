"""Detector: the learning rate each optimizer step used, against the audit's schedule, and where
the scheduler's calls fell relative to the optimizer's steps (lesson 08)."""

from __future__ import annotations

from .findings import Finding
from .messages import message
from .phrases import phrase
from .recording import Recording
from .spec import Setup, lr_factor


def _between(rec: Recording) -> tuple[list[int], int]:
    """Scheduler calls before each optimizer step (since the previous one), and after the last."""
    counts, current = [], 0
    for kind, _ in rec.events:
        if kind == "scheduler":
            current += 1
        elif kind == "step":
            counts.append(current)
            current = 0
    return counts, current


def scheduler_findings(rec: Recording, setup: Setup) -> list[Finding]:
    if not setup.scheduler:
        return []
    expected = [setup.lr * lr_factor(s.index) for s in rec.steps]
    seen = [s.lr for s in rec.steps]
    wrong = [
        i for i, (a, b) in enumerate(zip(seen, expected, strict=True)) if abs(a - b) > 1e-12 * b
    ]
    if not wrong:
        return []
    i = wrong[0]
    calls, steps = len(rec.scheduler_steps), len(rec.steps)
    before, after = _between(rec)
    evidence = {
        "scheduler.step() calls": calls,
        "optimizer steps": steps,
        "calls before each step": before,
        "lr at each step (seen)": seen,
        "reference": expected,
    }
    fields = {"calls": calls, "steps": steps, "step": i, "seen": seen[i], "expected": expected[i]}
    # the steady rate: calls between two steps that close full windows (the first step may differ)
    full = [c for c, s in zip(before, rec.steps, strict=True) if len(s.window) == setup.k]
    steady = full[1:] or full
    if setup.k > 1 and steady and min(steady) == max(steady) == setup.k:
        # between two steps of full windows: one call per micro-batch of the window
        text = message("SCHEDULER_PER_MICRO_BATCH", per_window=setup.k, k=setup.k, **fields)
        return [Finding("SCHEDULER_PER_MICRO_BATCH", text, evidence, tuple(wrong))]
    if calls == steps and all(c == 1 for c in before) and after == 0:
        warning = next((w for w in rec.warnings if "lr_scheduler.step()" in w), "")
        warned = phrase("warned", warning=warning.split(". ")[0]) if warning else ""
        text = message("SCHEDULER_BEFORE_STEP", warned=warned, **fields)
        return [Finding("SCHEDULER_BEFORE_STEP", text, evidence, tuple(wrong))]
    text = message("SCHEDULER_STEPS_WRONG", between=[*before, after], **fields)
    return [Finding("SCHEDULER_STEPS_WRONG", text, evidence, tuple(wrong))]
