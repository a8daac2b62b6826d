"""Lesson 10 exercises: counting optimizer steps across epochs, and where a resumed run restarts."""

from __future__ import annotations

from . import exercise

BATCHES, K, EPOCHS = 103, 4, 3
# (step, batches_per_epoch, k) cases a resume-position function must get right: the first epoch,
# later epochs, every epoch end, k dividing the epoch, k larger than the epoch, k = 1
_CASES = [(b, k) for b in (103, 100, 7, 3, 1) for k in (1, 2, 4, 5, 8)]


def _is_number(answer) -> bool:
    return isinstance(answer, (int, float)) and not isinstance(answer, bool)


@exercise("10.1", 1, "how many optimizer steps a learning-rate schedule must be sized for")
def total_steps(answer):
    from ..bookkeeping.counters import step_schedule

    if not _is_number(answer):
        return "answer with one number: the optimizer steps of the whole run"
    right = step_schedule(BATCHES, K, EPOCHS, "sync_at_epoch_end").steps
    if answer == BATCHES * EPOCHS:
        return "that counts micro-batches; the scheduler steps once per optimizer step"
    if answer in (BATCHES * EPOCHS // K, BATCHES // K * EPOCHS):
        return "the loop also steps on the short window that ends every epoch: round up per epoch"
    if answer != right:
        return "count the windows of one epoch (the last one may be short), then the epochs"
    return None


@exercise("10.2", 2, "the per-epoch counter without a step at the epoch's end")
def carried_over(answer):
    from ..bookkeeping.counters import step_schedule

    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return "answer with two numbers: (largest window, micro-batches never stepped)"
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in answer):
        return "both numbers are whole counts of micro-batches"
    s = step_schedule(BATCHES, K, EPOCHS, "per_epoch")
    largest, never = answer
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
    for b, k in _CASES:
        s = step_schedule(b, k, 4, "sync_at_epoch_end")
        for step in range(s.steps + 1):
            got = answer(step, b, k)
            right = s.position_after(step)
            if got != right:
                hint = (
                    "step × k is right only while every window holds k micro-batches"
                    if got == step * k
                    else "count whole epochs of ⌈batches / k⌉ steps first, then windows of k"
                )
                return f"resume_position({step}, {b}, {k}) returned {got!r}; {hint}"
    return None
