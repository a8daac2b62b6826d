"""Lesson 10 exercises: counting optimizer steps across epochs, and where a resumed run restarts."""

from __future__ import annotations

from . import exercise
from ._answers import Hint, integer, integers
from ._calls import Refuse
from ._draws import fresh_rng
from ._own_code import OwnCode

# 10.1 and 10.2 use other numbers than the lesson's 103 micro-batches, k = 4; 10.1's second case
# has k dividing the epoch, where a rule that adds one step per epoch (⌊b / k⌋ + 1) goes wrong
BATCHES, K, EPOCHS = 250, 8, 3
EVEN_BATCHES = 240
# 10.2: k = 16 and 4 epochs, where the per-epoch counter, a counter over the whole run and a
# count that makes the carried window an extra step give three different answers (at k = 8 and
# 3 epochs the first two coincide)
K_2, EPOCHS_2 = 16, 4
# (batches_per_epoch, k) cases a resume-position function must get right: the first epoch, later
# epochs, every epoch end, k dividing the epoch, k larger than the epoch (the loop never steps), k = 1
_CASES = [(b, k) for b in (103, 100, 7, 3, 1) for k in (1, 2, 4, 5, 8)]
# and cases drawn at check time, from a seed that differs on every call: a table of answers made
# before the check (with accumlab, which the check refuses while the answer runs) cannot hold them
_DRAWN, _MAX_B, _MAX_K, _MAX_EPOCHS, _STEPS_EACH = 6, 10_000, 64, 6, 8


def _drawn_cases(rng) -> list[tuple[int, int, int]]:
    """(step, b, k) triples: random b, k and epochs; per triple step 0, the run's last step, the
    steps around every epoch end and a few at random."""
    out = []
    for _ in range(_DRAWN):
        b, k, epochs = rng.randint(1, _MAX_B), rng.randint(1, _MAX_K), rng.randint(1, _MAX_EPOCHS)
        last = (b // k) * epochs
        steps = {0, last} | {e * (b // k) + d for e in range(1, epochs) for d in (0, 1)}
        steps |= {rng.randint(0, last) for _ in range(_STEPS_EACH)}
        out += [(step, b, k) for step in sorted(s for s in steps if 0 <= s <= last)]
    return out


@exercise("10.1", 1, "how many optimizer steps a learning-rate schedule must be sized for")
def total_steps(answer):
    from ..bookkeeping.counters import step_schedule

    got = integers(answer, 2)  # (250 micro-batches per epoch, 240), k = 8, 3 epochs
    cases = (BATCHES, EVEN_BATCHES)
    right = tuple(step_schedule(b, K, EPOCHS, "sync_at_epoch_end").steps for b in cases)
    if got == right:
        return None
    if 78 in got:
        return f"78 is the lesson's run (103 micro-batches, k = 4); these have k = {K}"
    if got == tuple(b * EPOCHS for b in cases):
        return "that counts micro-batches; the scheduler steps once per optimizer step"
    if got == tuple((b // K + 1) * EPOCHS for b in cases):
        return (
            "a short window ends an epoch only when k leaves micro-batches over: when k divides "
            "the epoch, its last full window already ends it"
        )
    if got[0] in (BATCHES * EPOCHS // K, BATCHES // K * EPOCHS):
        return "the loop also steps on the short window that ends every epoch: round up per epoch"
    return "count the windows of one epoch (the last one may be short), then the epochs"


@exercise("10.2", 2, "which steps of the per-epoch counter span two epochs")
def carried_over(answer):
    from ..bookkeeping.counters import step_schedule

    # the steps (from 1) whose window spans two epochs: a set of steps, so in any order
    got = integers(answer, EPOCHS_2 - 1, any_order=True)
    s = step_schedule(BATCHES, K_2, EPOCHS_2, "per_epoch")
    right = tuple(i + 1 for i in s.straddling())
    if got == right:
        return None
    lesson = tuple(i + 1 for i in step_schedule(103, 4, EPOCHS_2, "per_epoch").straddling())
    if got == lesson:
        return f"{got} is the lesson's run (103 micro-batches, k = 4); this one has {BATCHES} and k = {K_2}"
    # steps in every epoch: the carried window is one of the next epoch's
    per_epoch = BATCHES // K_2
    global_ = tuple(i + 1 for i in step_schedule(BATCHES, K_2, EPOCHS_2, "global").straddling())
    if got == global_:
        return (
            "that is a counter over the whole run (`global`), whose windows all hold k: the "
            "per-epoch counter restarts i at every epoch, so the window that carries an epoch's "
            "leftovers also takes k of the next epoch's micro-batches"
        )
    if got == tuple(e * -(-BATCHES // K_2) + 1 for e in range(1, EPOCHS_2)):
        return (
            f"this loop takes no step for an epoch's leftover micro-batches: ⌊{BATCHES} / {K_2}⌋ "
            "steps per epoch, not one more"
        )
    if got == tuple(e * (per_epoch + 1) for e in range(1, EPOCHS_2)):
        return (
            "the window that carries an epoch's leftovers is the next epoch's first step, and one "
            "of its ⌊batches / k⌋ steps, not an extra one"
        )
    return (
        "an epoch's leftover micro-batches wait in .grad and join the next epoch's first window: "
        "count the steps each epoch takes"
    )


def _true_position(step: int, b: int, k: int) -> int:
    """The per-epoch counter's position after `step` steps: whole epochs, then the schedule of one
    (a schedule of every epoch, built micro-step by micro-step, is slow at 10⁴ micro-batches)."""
    from ..bookkeeping.counters import step_schedule

    per_epoch = b // k
    if step == 0:
        return 0
    epochs, in_epoch = divmod(step, per_epoch)
    if in_epoch == 0:  # the epoch's last step: its window ends k × per_epoch into that epoch
        epochs, in_epoch = epochs - 1, per_epoch
    # within its epoch, from the schedule of one epoch: every epoch's steps end at the same
    # micro-batches of that epoch (leftovers carry over into the next window, not its ends)
    return epochs * b + step_schedule(b, k, 1, "per_epoch").position_after(in_epoch)


def _quoted(value) -> str:
    """The answer's value as the hint quotes it: a huge int by its size (Python refuses to print
    one of over 4,300 digits), anything else cut to 40 characters."""
    if isinstance(value, int) and abs(value) > 10**40:
        return f"an integer of {len(str(abs(value))) if abs(value) < 10**4000 else 'over 4,000'} digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _resume_cases(rng) -> list[tuple[int, int, int, bool]]:
    """(step, batches per epoch, k, drawn at random?) for 10.3: every step of the fixed cases,
    then the drawn ones."""
    from ..bookkeeping.counters import step_schedule

    fixed = [(b, k, step_schedule(b, k, 4, "per_epoch").steps) for b, k in _CASES]
    cases = [(step, b, k, False) for b, k, steps in fixed for step in range(steps + 1)]
    return cases + [(step, b, k, True) for step, b, k in _drawn_cases(rng)]


@exercise("10.3", 3, "where a resumed run must start reading data")
def resume_position(answer):
    from ..bookkeeping.counters import position_from_step, step_schedule

    if not callable(answer):
        return "answer with a function resume_position(step, batches_per_epoch, k) -> int"

    # the cases only: each right position is computed after every answer has returned, so no
    # frame the answer runs under holds one (nor a schedule that knows them)
    cases = _resume_cases(fresh_rng())
    refused = Refuse(
        "al.bookkeeping.position_from_step",
        "al.bookkeeping.step_schedule",
        "al.bookkeeping.scheduler_total_steps",
        # called through a worker started earlier these are not seen run, but are refused
        "al.bookkeeping.counters.Schedule.position_after",
        "al.exercises.lesson10._true_position",
    )
    own = OwnCode()
    returned = []
    with refused:
        for step, b, k, _ in cases:
            got, ran = own.calls(answer, step, b, k)
            if ran:
                raise Hint(
                    f"this exercise asks you to write it yourself — your answer ran {ran[0]}"
                )
            try:
                returned.append((integer(got), got))
            except Hint as hint:
                raise Hint(
                    f"resume_position({step}, {b}, {k}) returned {_quoted(got)}: {hint}"
                ) from None
    for (step, b, k, drawn), (value, shown) in zip(cases, returned, strict=True):
        got = shown  # quoted by the hint below
        right = (
            _true_position(step, b, k)
            if drawn
            else step_schedule(b, k, 4, "per_epoch").position_after(step)
        )
        if value != right:
            break
    else:
        return None
    # named outside the block: a refused function the checker holds would read as handed to it
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
    return f"resume_position({step}, {b}, {k}) returned {_quoted(got)}; {hint}"
