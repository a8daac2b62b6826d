"""Detectors: when the optimizer stepped, and what learning rate each step used (lesson 08)."""

from __future__ import annotations

from .findings import Finding
from .messages import message
from .runner import Recording
from .spec import Setup, lr_factor


def schedule_findings(rec: Recording, setup: Setup) -> list[Finding]:
    n, k = len(setup.batches), setup.k
    expected = setup.positions
    seen = [s.position for s in rec.steps]
    windows = [s.window for s in rec.steps]
    evidence = {"steps after micro-batches (seen)": seen, "reference": expected}
    if seen == expected and windows == setup.windows and len(rec.forwards) == n:
        return []
    if k > 1 and seen == list(range(1, n + 1)):
        text = message(
            "STEP_EVERY_MICRO_BATCH",
            seen=len(seen),
            micro_batches=n,
            expected=len(expected),
            k=k,
        )
        return [Finding("STEP_EVERY_MICRO_BATCH", text, evidence)]
    if seen == expected[:-1] and windows == setup.windows[:-1]:
        tail = setup.windows[-1]
        forwarded = set(rec.forwards) >= set(tail)
        samples = sum(len(setup.batches[i]) for i in tail)
        text = message(
            "LAST_WINDOW_DROPPED",
            "forwarded" if forwarded else "not_forwarded",
            size=len(tail),
            samples=samples,
        )
        return [
            Finding(
                "LAST_WINDOW_DROPPED", text, {**evidence, "samples left out per epoch": samples}
            )
        ]
    body = seen[:-1] if len(seen) > 1 and seen[-1] == n and seen[-1] - seen[-2] != k else seen
    regular = len(body) >= 2 and all(b - a == k for a, b in zip(body, body[1:], strict=False))
    if k > 1 and regular and body[0] != k:
        text = message("OFF_BY_ONE_SCHEDULE", first=body[0], k=k)
        return [Finding("OFF_BY_ONE_SCHEDULE", text, evidence)]
    text = message(
        "UNEXPLAINED_SCHEDULE",
        seen=seen,
        expected=expected,
        windows=[list(w) for w in windows][:6],
    )
    return [Finding("UNEXPLAINED_SCHEDULE", text, evidence)]


def scheduler_findings(rec: Recording, setup: Setup) -> list[Finding]:
    if not setup.scheduler:
        return []
    expected = [setup.lr * lr_factor(s.index) for s in rec.steps]
    seen = [s.lr for s in rec.steps]
    wrong = [
        i
        for i, (a, b) in enumerate(zip(seen, expected, strict=True))
        if abs(a - b) > 1e-12 * abs(b)
    ]
    if not wrong:
        return []
    i = wrong[0]
    calls, steps = len(rec.scheduler_steps), len(rec.steps)
    evidence = {
        "scheduler.step() calls": calls,
        "optimizer steps": steps,
        "lr at each step (seen)": seen,
        "reference": expected,
    }
    per_micro = calls == len(rec.forwards) and calls != steps
    code = "SCHEDULER_PER_MICRO_BATCH" if per_micro else "SCHEDULER_STEPS_WRONG"
    text = message(
        code,
        calls=calls,
        steps=steps,
        rate=calls / steps,
        step=i,
        seen=seen[i],
        expected=expected[i],
    )
    return [Finding(code, text, evidence, tuple(wrong))]
