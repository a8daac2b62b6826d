"""Lesson 10 exercises: counting optimizer steps across epochs, and where a resumed run restarts."""

from __future__ import annotations

import sys

from . import exercise

# 10.1 and 10.2 use other numbers than the lesson's 103 micro-batches, k = 4
BATCHES, K, EPOCHS = 250, 8, 3
# (batches_per_epoch, k) cases a resume-position function must get right: the first epoch, later
# epochs, every epoch end, k dividing the epoch, k larger than the epoch, k = 1
_CASES = [(b, k) for b in (103, 100, 7, 3, 1) for k in (1, 2, 4, 5, 8)]


def _whole(value) -> int | None:
    """A count as people type it: an int, a numpy integer, a 0-d tensor, or a float with no
    fraction (96.0). None for anything else."""
    import numbers

    import torch

    if isinstance(value, bool):
        return None
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.is_complex():
            return None
        value = value.item()
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and float(value).is_integer():
        return int(value)
    return None


def _refused_calls(fn, *args):
    """Run `fn(*args)` and name accumlab's own position or schedule functions it called: the
    exercise asks for the arithmetic, not for the package's answer to it."""
    from ..bookkeeping import counters

    refused = {
        counters.position_from_step.__code__: "al.bookkeeping.position_from_step",
        counters.step_schedule.__code__: "al.bookkeeping.step_schedule",
        counters.Schedule.position_after.__code__: "Schedule.position_after",
        counters.scheduler_total_steps.__code__: "al.bookkeeping.scheduler_total_steps",
    }
    seen: list[str] = []

    def profile(frame, event, _arg):
        if event == "call" and frame.f_code in refused:
            seen.append(refused[frame.f_code])

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = fn(*args)
    finally:
        sys.setprofile(previous)
    return result, seen


@exercise("10.1", 1, "how many optimizer steps a learning-rate schedule must be sized for")
def total_steps(answer):
    from ..bookkeeping.counters import step_schedule

    value = _whole(answer)
    if value is None:
        return f"answer with one whole number: the optimizer steps of the run, got {answer!r:.40}"
    right = step_schedule(BATCHES, K, EPOCHS, "sync_at_epoch_end").steps
    if value == 78:
        return (
            f"78 is the lesson's run (103 micro-batches, k = 4); this one has {BATCHES} and k = {K}"
        )
    if value == BATCHES * EPOCHS:
        return "that counts micro-batches; the scheduler steps once per optimizer step"
    if value in (BATCHES * EPOCHS // K, BATCHES // K * EPOCHS):
        return "the loop also steps on the short window that ends every epoch: round up per epoch"
    if value != right:
        return "count the windows of one epoch (the last one may be short), then the epochs"
    return None


@exercise("10.2", 2, "the per-epoch counter without a step at the epoch's end")
def carried_over(answer):
    from ..bookkeeping.counters import step_schedule

    if isinstance(answer, str) or not hasattr(answer, "__len__") or len(answer) != 2:
        return "answer with two numbers: (largest window, micro-batches never stepped)"
    largest, never = (_whole(v) for v in answer)
    if largest is None or never is None:
        return "both numbers are whole counts of micro-batches"
    s = step_schedule(BATCHES, K, EPOCHS, "per_epoch")
    if (largest, never) == (7, 3):
        return f"(7, 3) is the lesson's run (103 micro-batches, k = 4); this one has {BATCHES} and k = {K}"
    if largest == K:
        return "look at the first window of the second epoch: what is already in .grad?"
    if largest != max(s.sizes):
        return "the leftover micro-batches of an epoch join the next epoch's first k"
    if never != len(s.leftover):
        return "after the last epoch nothing comes to carry the leftover micro-batches into a step"
    return None


@exercise("10.3", 3, "where a resumed run must start reading data")
def resume_position(answer):
    from ..bookkeeping.counters import step_schedule

    if not callable(answer):
        return "answer with a function resume_position(step, batches_per_epoch, k) -> int"
    cases = []
    for b, k in _CASES:
        s = step_schedule(b, k, 4, "sync_at_epoch_end")
        cases += [(step, b, k, s.position_after(step)) for step in range(s.steps + 1)]
    for step, b, k, right in cases:
        got, refused = _refused_calls(answer, step, b, k)
        if refused:
            return (
                f"your function called {refused[0]}: that is accumlab's answer, not yours — "
                "count whole epochs and windows with plain arithmetic"
            )
        if _whole(got) != right:
            hint = (
                "step × k is right only while every window holds k micro-batches"
                if _whole(got) == step * k
                else "count whole epochs of ⌈batches / k⌉ steps first, then windows of k"
            )
            return f"resume_position({step}, {b}, {k}) returned {got!r:.40}; {hint}"
    return None
