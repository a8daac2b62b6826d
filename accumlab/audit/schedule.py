"""Detector: when the optimizer stepped, epoch after epoch, against the reference's windows and
the stated policy for a short last window (lesson 08).

Steps are told apart per epoch (the same local pattern in every epoch: a step condition that
restarts with the epoch) or across epochs (steps every k micro-batches counted over the run: a
counter that carries over). What happened to a short last window the loop never stepped on is
read from the next epoch's first step: its gradient either holds that window's micro-batches
(carried) or not (dropped); `gradients.py` measured which.
"""

from __future__ import annotations

import dataclasses

from .findings import Finding
from .gradients import GradientResult
from .messages import message
from .messages_epochs import CHECK_AS_CARRY, LAST_WINDOW_FIX, RUN_END, WEIGHED
from .phrases import WEIGHT_WORDS, phrase
from .recording import Recording
from .spec import Setup


def _weight_words(grads: GradientResult, step: int, k: int) -> str:
    """How the loop weighed the window of `step`, measured ('was divided by k = 4, ...')."""
    match = next((m for m in grads.matches if m.step == step), None)
    if match is None or match.chosen is None or "weights" not in match.chosen.how:
        return "its weight could not be measured"
    return WEIGHT_WORDS[match.chosen.how["weights"]].format(n=len(match.window), k=k)


def _leftover(rec: Recording, total: int) -> str:
    last = rec.steps[-1].position if rec.steps else 0
    if last >= total or rec.leftover_grad_norm == 0:
        return ""
    return phrase(
        "leftover", batches=list(range(last + 1, total + 1)), norm=rec.leftover_grad_norm
    ).replace("Micro-batch(es) ", "Micro-batch(es) (counting from 1 over the run) ")


def _epochs_run(rec: Recording) -> int:
    return max(len(rec.epoch_starts), 1)


def _per_epoch(rec: Recording, n: int) -> list[int] | None:
    """The step positions within an epoch (counting from 1) when every epoch shows the same ones."""
    patterns = [[] for _ in range(_epochs_run(rec))]
    for s in rec.steps:
        patterns[s.epoch].append(s.position - s.epoch * n)
    return patterns[0] if all(p == patterns[0] for p in patterns) else None


def _windows_match(rec: Recording, setup: Setup) -> bool:
    """Each step's window is the reference's, or (a window that began in the previous epoch) its
    part in this epoch is: what the earlier part did to the gradient is the gradient check's."""
    for step, ref in zip(rec.steps, setup.reference_windows, strict=True):
        own = tuple(b for b in step.window if b is not None and b // setup.n == step.epoch)
        # a window's micro-batches in another order are the same window: the sum is the same
        if _as_set(step.window) != _as_set(ref) and _as_set(own) != _as_set(ref):
            return False
    return True


def _as_set(window) -> list:
    """A window's micro-batches, whatever order the loop ran them in (an unknown one, None,
    kept: it is not the reference's)."""
    return sorted(window, key=lambda b: -1 if b is None else b)


def compared_setup(rec: Recording, setup: Setup) -> Setup:
    """The setup to check the gradients against: `setup`, or, when the loop stepped every k
    micro-batches counted over the run (windows continuing across epochs), the same with
    last_window="carry", so those windows are compared whole."""
    if setup.last_window == "carry" or not setup.short_last or len(rec.epoch_starts) < 2:
        return setup
    carry = dataclasses.replace(setup, last_window="carry", epochs=len(rec.epoch_starts))
    seen = [s.position for s in rec.steps]
    ends_short = len(carry.windows[-1]) < setup.k  # a last window the run may leave unstepped
    if seen == carry.positions or (ends_short and seen == carry.positions[:-1]):
        return carry
    return setup


def schedule_findings(
    rec: Recording, setup: Setup, grads: GradientResult, compared: Setup | None = None
) -> list[Finding]:
    """`compared`: the setup the gradients were checked against, when it is not `setup` (the
    loop's windows run across epochs)."""
    n, k = setup.n, setup.k
    expected = setup.positions
    seen = [s.position for s in rec.steps]
    evidence = {"steps after micro-batches (seen)": seen, "reference": expected}
    if compared is not None and compared is not setup:
        return _crosses(rec, setup, grads, evidence)
    if seen == expected and _windows_match(rec, setup):
        return []
    total = n * _epochs_run(rec)
    if setup.last_window == "carry" and seen == expected[:-1] and total % k:
        text = RUN_END.format(size=total % k, leftover=_leftover(rec, total))
        return [Finding("LAST_WINDOW_DROPPED", text, evidence, ())]
    if k > 1 and seen == list(range(1, total + 1)):
        text = message(
            "STEP_EVERY_MICRO_BATCH",
            seen=len(seen),
            micro_batches=total,
            expected=len(expected),
            k=k,
            weight=_weight_words(grads, 0, k).replace("a full window", "a full window's"),
        )
        return [Finding("STEP_EVERY_MICRO_BATCH", text, evidence)]
    local = _per_epoch(rec, n)
    reference = setup.epoch_positions()
    if local is not None and setup.short_last and setup.last_window != "drop":
        if local == reference[:-1]:
            return _tail(rec, setup, grads, evidence)
    if local is not None and setup.short_last and setup.last_window == "drop":
        if local == [*reference, n]:
            step = next(i for i, s in enumerate(rec.steps) if s.position == n)
            text = message(
                "LAST_WINDOW_KEPT",
                size=n % k,
                weight="its loss " + _weight_words(grads, step, k),
            )
            return [Finding("LAST_WINDOW_KEPT", text, evidence, (step,))]
    if local is not None:
        shifted = _off_by_one(rec, setup, grads, local, evidence, total)
        if shifted:
            return shifted
    text = message(
        "UNEXPLAINED_SCHEDULE",
        seen=seen,
        expected=expected,
        windows=[list(s.window) for s in rec.steps][:6],
        leftover=_leftover(rec, total),
    )
    return [Finding("UNEXPLAINED_SCHEDULE", text, evidence)]


def _off_by_one(rec, setup, grads, local, evidence, total) -> list[Finding]:
    """Steps every k micro-batches within each epoch, but not at the window ends."""
    n, k = setup.n, setup.k
    body = local[:-1] if len(local) > 1 and local[-1] == n and local[-1] - local[-2] != k else local
    regular = len(body) >= 2 and all(b - a == k for a, b in zip(body, body[1:], strict=False))
    if not (k > 1 and regular and body[0] != k):
        return []
    shift = body[0] - k
    expected = setup.epoch_positions()
    first = len(rec.steps[0].window)
    later = _carried_over(rec)
    text = message(
        "OFF_BY_ONE_SCHEDULE",
        seen=local,
        expected=expected,
        shift=f"{abs(shift)} micro-batch(es) ({'early' if shift < 0 else 'late'})",
        seen0=[p - 1 for p in local],
        expected0=[p - 1 for p in expected],
        k=k,
        first=phrase("first_window", size=first, weight=_weight_words(grads, 0, k)),
        leftover=(phrase("carried_over", steps=later) if later else "") + _leftover(rec, total),
    )
    return [Finding("OFF_BY_ONE_SCHEDULE", text, evidence)]


def _carried_over(rec: Recording) -> list[int]:
    """First steps of epochs that began with a gradient in .grad that nothing zeroed before them."""
    out = []
    for epoch, (start, norm) in enumerate(zip(rec.epoch_starts, rec.carried_in, strict=True)):
        first = next((s for s in rec.steps if s.epoch == epoch), None)
        if epoch and norm > 0 and first is not None:
            if not any(start <= z < first.position for z in rec.zero_grads):
                out.append(first.index)
    return out


def _tail_samples(setup: Setup) -> tuple[int, int, int]:
    """(micro-batches, samples) of an epoch's short last window, and the epoch's samples."""
    n, k = setup.n, setup.k
    tail = range(n - n % k, n)
    return len(tail), sum(len(setup.batches[i]) for i in tail), sum(len(b) for b in setup.batches)


def _tail(rec: Recording, setup: Setup, grads: GradientResult, evidence: dict) -> list[Finding]:
    """Each epoch's short last window never stepped on in its epoch: dropped, or carried into the
    next epoch's first step (then LAST_WINDOW_CARRIED, from the gradient check, says so)."""
    firsts = [m for m in grads.matches if m.carried and m.own]
    if any("LAST_WINDOW_CARRIED" in m.codes for m in firsts):
        return []  # the gradient finding says what happened, with the measured step
    size, samples, total = _tail_samples(setup)
    forwarded = set(rec.forwards) >= set(range(setup.n - size, setup.n))
    how = (
        "their gradients were computed, then never used by an optimizer step"
        if forwarded
        else "they were never forwarded"
    )
    zeroed = [m.step for m in firsts if m.chosen is not None and not m.codes]
    if _epochs_run(rec) == 1:
        variant = "one_epoch"
    elif zeroed and len(zeroed) == _epochs_run(rec) - 1:
        variant = "zeroed"
    else:
        variant = "unknown"
    leftover = ""
    if forwarded and rec.leftover_grad_norm > 0:
        leftover = phrase("tail_left", norm=rec.leftover_grad_norm, scaled=_scaled(rec))
    text = message(
        "LAST_WINDOW_DROPPED",
        variant,
        size=size,
        samples=samples,
        how=how,
        used=total - samples,
        total=total,
        steps=zeroed,
        leftover=leftover,
        policy="drop",
    )
    evidence = {
        **evidence,
        "samples left out per epoch": samples,
        "gradient left in .grad at the end (norm)": rec.leftover_grad_norm,
    }
    return [Finding("LAST_WINDOW_DROPPED", text, evidence, ())]


def _scaled(rec: Recording) -> str:
    scales = [scale for method, _, scale in rec.scaler_calls if method == "scale"]
    return (
        f", as stored: still multiplied by the GradScaler's scale {scales[-1]:g}" if scales else ""
    )


def _crosses(rec: Recording, setup: Setup, grads: GradientResult, evidence: dict) -> list:
    """The loop's steps fall every k micro-batches counted over the run: its windows continue
    across epochs. A policy when every window is whole; CARRIED_WINDOW_ZEROED (from the gradient
    check) when the part before an epoch's start was zeroed."""
    if any("CARRIED_WINDOW_ZEROED" in m.codes for m in grads.matches):
        return []
    whole = all(c.rel_error is not None and not c.explained_by for c in grads.checks) and all(
        c.rel_error <= setup.rtol for c in grads.checks
    )
    total = setup.n * _epochs_run(rec)
    leftover = _leftover(rec, total)
    fix = LAST_WINDOW_FIX if whole and not leftover else CHECK_AS_CARRY
    text = message(
        "WINDOWS_CROSS_EPOCHS",
        size=setup.n % setup.k,
        seen=evidence["steps after micro-batches (seen)"],
        expected=evidence["reference"],
        k=setup.k,
        weighed=WEIGHED[whole, not leftover],
        leftover=leftover,
        fix=fix.format(policy="carry"),
    )
    return [Finding("WINDOWS_CROSS_EPOCHS", text, evidence)]
