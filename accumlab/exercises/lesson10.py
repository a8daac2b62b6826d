"""Lesson 10 exercises: counting optimizer steps across epochs, and where a resumed run restarts."""

from __future__ import annotations

import os
import sys
import threading
import types

from . import exercise
from ._answers import Hint, integer, integers
from ._calls import Refuse, code_key

# 10.1 and 10.2 use other numbers than the lesson's 103 micro-batches, k = 4
BATCHES, K, EPOCHS = 250, 8, 3
# (batches_per_epoch, k) cases a resume-position function must get right: the first epoch, later
# epochs, every epoch end, k dividing the epoch, k larger than the epoch (the loop never steps), k = 1
_CASES = [(b, k) for b in (103, 100, 7, 3, 1) for k in (1, 2, 4, 5, 8)]


class _OwnCode:
    """Recognises accumlab's own code while an answer runs (10.3 asks for arithmetic the learner
    writes, so any of it is accumlab's answer): a frame from a file of the package — the
    schedules, the audit's reference windows, any other helper — and a copy of one of its code
    objects made outside it (`code.replace(co_name=..., co_filename=...)` keeps the bytecode, its
    constants and names; only functions and methods of some length are matched this way, so that
    a learner's one-line helper never matches a one-line helper of accumlab's). Allowed: the
    checker machinery (accumlab/exercises/), the lazy name tables (`__init__.py`, `_lazy.py`)
    that `al.<topic>.<name>` runs through."""

    def __init__(self):
        import accumlab

        self.package = os.path.dirname(os.path.abspath(accumlab.__file__)) + os.sep
        self.allowed = (os.path.join(self.package, "exercises") + os.sep,)
        self.keys: dict = {}  # (bytecode, constants, names) -> where accumlab defines it
        for name, module in list(sys.modules.items()):
            if name.split(".")[0] == "accumlab" and module and not name.startswith(_CHECKERS):
                for value in list(vars(module).values()):
                    for code in _codes(value):
                        path = os.path.abspath(code.co_filename)
                        if path.startswith(self.package) and len(code.co_code) >= _MATCHED:
                            self.keys.setdefault(_key(code), self._label(code))
        self.seen: dict = {}  # code object -> label or None, decided once per code object

    def _label(self, code) -> str:
        path = os.path.abspath(code.co_filename)
        where = path[len(self.package) :] if path.startswith(self.package) else code.co_filename
        return f"accumlab's {getattr(code, 'co_qualname', code.co_name)} (accumlab/{where})"

    def label(self, code) -> str | None:
        """Why `code` is accumlab's own, or None."""
        if code not in self.seen:
            path = os.path.abspath(code.co_filename)
            name = os.path.basename(path)
            if path.startswith(self.package):
                own = not path.startswith(self.allowed) and name not in ("__init__.py", "_lazy.py")
                self.seen[code] = self._label(code) if own else None
            else:
                self.seen[code] = self.keys.get(_key(code))
        return self.seen[code]

    def calls(self, fn, *args):
        """Run `fn(*args)`; return its result and the accumlab code it ran."""
        ran: list[str] = []

        def profile(frame, event, _arg):
            if event == "call":
                label = self.label(frame.f_code)
                if label is not None:
                    ran.append(label)

        previous, previous_threads = sys.getprofile(), threading.getprofile()
        sys.setprofile(profile)
        threading.setprofile(profile)  # threads the answer starts are profiled too
        try:
            result = fn(*args)
            if sys.getprofile() is not profile:  # the answer switched the watch off
                ran.append("sys.setprofile, which stops al.check seeing what your answer runs")
        finally:
            sys.setprofile(previous)
            threading.setprofile(previous_threads)
        return result, ran


_CHECKERS = "accumlab.exercises"
_MATCHED = 32  # bytes of bytecode: about ten instructions (accumlab's shortest has three)


def _key(code) -> tuple:
    # nested code (a generator expression) by its names and constants: compiled again from the
    # source elsewhere, its bytecode differs
    return code_key(code)


def _codes(value) -> list:
    """The code objects of a module attribute: a function's, a class's methods and properties."""
    if isinstance(value, types.FunctionType):
        return [value.__code__]
    if not isinstance(value, type) or not value.__module__.startswith("accumlab"):
        return []
    found = []
    for attr in vars(value).values():
        attr = getattr(attr, "__func__", attr)  # staticmethod, classmethod
        for fn in (attr, getattr(attr, "fget", None), getattr(attr, "fset", None)):
            if isinstance(fn, types.FunctionType):
                found.append(fn.__code__)
    return found


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


@exercise("10.2", 2, "which steps of the per-epoch counter span two epochs")
def carried_over(answer):
    import math

    from ..bookkeeping.counters import step_schedule

    got = tuple(integers(answer, EPOCHS - 1))  # the steps (from 1) whose window spans two epochs
    s = step_schedule(BATCHES, K, EPOCHS, "per_epoch")
    right = tuple(i + 1 for i in s.straddling())
    if got == right:
        return None
    lesson = tuple(i + 1 for i in step_schedule(103, 4, EPOCHS, "per_epoch").straddling())
    if got == lesson:
        return f"{got} is the lesson's run (103 micro-batches, k = 4); this one has {BATCHES} and k = {K}"
    if got == tuple(s.straddling()):
        return "count the optimizer steps from 1: the first step is step 1"
    per_epoch = BATCHES // K  # steps in every epoch: the carried window is one of the next epoch's
    if got == tuple(e * math.ceil(BATCHES / K) + 1 for e in range(1, EPOCHS)):
        return (
            f"this loop takes no step for an epoch's leftover micro-batches: ⌊{BATCHES} / {K}⌋ "
            "steps per epoch, not one more"
        )
    if got == tuple(e * (per_epoch + 1) for e in range(1, EPOCHS)):
        return (
            "the window that carries an epoch's leftovers is the next epoch's first step, and one "
            "of its ⌊batches / k⌋ steps, not an extra one"
        )
    return (
        "an epoch's leftover micro-batches wait in .grad and join the next epoch's first window: "
        "count the steps each epoch takes"
    )


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
    own = _OwnCode()
    with refused:
        for step, b, k, right in cases:
            got, ran = own.calls(answer, step, b, k)
            if ran:
                raise Hint(
                    f"this exercise asks you to write it yourself — your answer ran {ran[0]}"
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
