"""Lesson 10 exercises: counting optimizer steps across epochs, and where a resumed run restarts."""

from __future__ import annotations

import sys

from . import exercise
from ._answers import Hint, integer, integers
from ._calls import Refuse

# 10.1 and 10.2 use other numbers than the lesson's 103 micro-batches, k = 4
BATCHES, K, EPOCHS = 250, 8, 3
# (batches_per_epoch, k) cases a resume-position function must get right: the first epoch, later
# epochs, every epoch end, k dividing the epoch, k larger than the epoch (the loop never steps), k = 1
_CASES = [(b, k) for b in (103, 100, 7, 3, 1) for k in (1, 2, 4, 5, 8)]


def _refused_calls(fn, *args):
    """Run `fn(*args)` and name the accumlab schedule code it ran: a Schedule built through
    `al.bookkeeping.Setup(...).schedule()` comes from accumlab's own code, so `Refuse` lets it
    through; its windows (`position_after`, `windows[step - 1][-1] + 1`, `ends_window`) are
    accumlab's answer to this exercise, and every Schedule accumlab builds comes from
    `step_schedule`."""
    from ..bookkeeping import counters

    refused = {
        counters.Schedule.position_after.__code__: "Schedule.position_after",
        counters.step_schedule.__code__: "al.bookkeeping.step_schedule (through Setup.schedule)",
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

    value = integer(answer)
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

    largest, never = integers(answer, 2)  # (largest window, micro-batches never stepped)
    s = step_schedule(BATCHES, K, EPOCHS, "per_epoch")
    if (largest, never) == (7, 3):
        return f"(7, 3) is the lesson's run (103 micro-batches, k = 4); this one has {BATCHES} and k = {K}"
    if largest == K:
        return "look at the first window of the second epoch: what is already in .grad?"
    if largest != max(s.sizes):
        return "the leftover micro-batches of an epoch join the next epoch's first k"
    if never == EPOCHS * len(s.leftover):
        return (
            "an epoch's leftover micro-batches stay in .grad and are stepped with the next "
            "epoch's first window: only the last epoch has no next window"
        )
    if never != len(s.leftover):
        return "after the last epoch nothing comes to carry the leftover micro-batches into a step"
    return None


@exercise("10.3", 3, "where a resumed run must start reading data")
def resume_position(answer):
    from ..bookkeeping.counters import position_from_step, step_schedule

    if not callable(answer):
        return "answer with a function resume_position(step, batches_per_epoch, k) -> int"
    cases = []
    for b, k in _CASES:
        s = step_schedule(b, k, 4, "per_epoch")
        cases += [(step, b, k, s.position_after(step)) for step in range(s.steps + 1)]
    refused = Refuse(
        "al.bookkeeping.position_from_step",
        "al.bookkeeping.step_schedule",
        "al.bookkeeping.scheduler_total_steps",
    )
    with refused:
        for step, b, k, right in cases:
            got, called = _refused_calls(answer, step, b, k)
            if called:
                raise Hint(
                    f"this exercise asks you to write it yourself — your answer called {called[0]}"
                )
            try:
                value = integer(got)
            except Hint as hint:
                raise Hint(
                    f"resume_position({step}, {b}, {k}) returned {got!r:.40}: {hint}"
                ) from None
            if value != right:
                if value == step * k:
                    hint = "step × k is right only while no epoch has leftover micro-batches"
                elif value == position_from_step(step, b, k, "trainer"):
                    hint = (
                        "that is the Trainer's rule, for a loop that also steps at every epoch's "
                        "end; this loop takes ⌊batches / k⌋ steps per epoch"
                    )
                else:
                    hint = (
                        "a step ends a window of k inside its epoch; the epoch's leftover "
                        "micro-batches come after that epoch's last step"
                    )
                raise Hint(f"resume_position({step}, {b}, {k}) returned {got!r:.40}; {hint}")
    return None
