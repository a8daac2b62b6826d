"""Lesson 10: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import math
import multiprocessing
import sys
import threading
import types

import numpy as np
import torch

import accumlab as al
from accumlab.bookkeeping import counters


def _position_by_walking(step, batches_per_epoch, k):
    # another algorithm: run the per-epoch counter micro-batch by micro-batch
    position, steps, i = 0, 0, 0
    while steps < step:
        position, i = position + 1, i + 1
        if i % k == 0:
            steps += 1
        if i == batches_per_epoch:
            i = 0
    return position


def _position_numpy(step, batches_per_epoch, k):
    if step == 0:
        return np.int64(0)
    epochs, before = divmod(np.int64(step) - 1, batches_per_epoch // k)
    return epochs * batches_per_epoch + (before + 1) * k


def _position_library(step, batches_per_epoch, k):
    return al.bookkeeping.position_from_step(step, batches_per_epoch, k)


def _schedule(batches_per_epoch, k):
    return al.bookkeeping.Setup(
        batches_per_epoch=batches_per_epoch, accumulation_steps=k, epochs=4, counter="per_epoch"
    ).schedule()


def _position_schedule(step, batches_per_epoch, k):
    return _schedule(batches_per_epoch, k).position_after(step)


def _position_windows(step, batches_per_epoch, k):
    # position_after inlined: the end of the window of step number `step`
    return 0 if step == 0 else _schedule(batches_per_epoch, k).windows[step - 1][-1] + 1


def _position_ends(step, batches_per_epoch, k):
    ends = _schedule(batches_per_epoch, k).ends_window()
    done = 0
    for g, end in enumerate(ends):
        if done == step:
            return g
        done += end
    return len(ends)


def _spec_windows(batches_per_epoch, k):
    from accumlab.audit import spec  # the audit's reference: windows of k over every epoch

    return spec.Setup(
        model=None, batches=[None] * batches_per_epoch, k=k, loss=None, lr=0.1,
        last_window="drop", epochs=4,
    )  # fmt: skip


def _position_audit_spec(step, batches_per_epoch, k):
    return 0 if step == 0 else _spec_windows(batches_per_epoch, k).positions[step - 1]


def _position_audit_windows(step, batches_per_epoch, k):
    full = [w for w in _spec_windows(batches_per_epoch, k).windows if len(w) == k]
    return 0 if step == 0 else full[step - 1][-1] + 1


# accumlab's step_schedule under another name, copied before the check runs (as a learner's
# cell would): once with its own file name, once claiming another file and calling the learner's
# own argument checks instead of accumlab's
_renamed = types.FunctionType(
    counters.step_schedule.__code__.replace(co_name="mine"), counters.step_schedule.__globals__
)
_elsewhere = types.FunctionType(
    counters.step_schedule.__code__.replace(co_name="mine", co_filename="<mine>"),
    {
        **counters.__dict__,
        "positive_int": lambda name, value: value,
        "one_of": lambda *args: None,
        "check_micro_steps": lambda *args: None,
    },
)


def _position_code_copy(step, batches_per_epoch, k):
    schedule = _renamed(batches_per_epoch, k, 4, "per_epoch")
    return 0 if step == 0 else schedule.windows[step - 1][-1] + 1


def _position_code_copy_elsewhere(step, batches_per_epoch, k):
    schedule = _elsewhere(batches_per_epoch, k, 4, "per_epoch")
    return 0 if step == 0 else schedule.windows[step - 1][-1] + 1


def _position_trainer_rule(step, batches_per_epoch, k):
    # the rule of a loop that also steps at every epoch end: ⌈batches / k⌉ steps per epoch
    epochs, in_epoch = divmod(step, math.ceil(batches_per_epoch / k))
    return epochs * batches_per_epoch + in_epoch * k


def _position_without_k(step, batches_per_epoch, k):
    if step == 0:
        return 0
    epochs, before = divmod(step - 1, batches_per_epoch // k)
    return epochs * batches_per_epoch + before + 1  # the × k forgotten


_COPIED = types.FunctionType(counters.step_schedule.__code__, counters.__dict__)  # made before


def _position_profile_off(step, b, k):
    """accumlab's schedule, with the profiler that watches for it switched off first."""
    sys.setprofile(None)
    return _COPIED(b, k, 4, "per_epoch").position_after(step)


def _position_in_a_thread(step, b, k):
    """accumlab's schedule run in a thread the answer starts (an executor: what the thread raises
    comes back to the answer, as from any future)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: _COPIED(b, k, 4, "per_epoch").position_after(step)).result()


def _position_in_a_plain_thread(step, b, k):
    """accumlab's schedule run in a threading.Thread the answer starts: the refusal ends that
    thread, quietly (al.check keeps Python's thread traceback out of the notebook)."""
    out = []
    worker = threading.Thread(
        target=lambda: out.append(_COPIED(b, k, 4, "per_epoch").position_after(step))
    )
    worker.start()
    worker.join()
    return out[0] if out else 0


def _fresh_schedule(b, k, step):
    """counters.py compiled afresh: classes of its own, which no guard replaces; only the watch
    of what runs can see it is accumlab's."""
    mine = sys.modules["mine_counters"] = types.ModuleType("mine_counters")
    mine.__package__ = "accumlab.bookkeeping"  # its dataclasses look their module up
    try:
        with open(counters.__file__) as source:
            exec(compile(source.read(), "mine.py", "exec"), mine.__dict__)
        schedule = mine.step_schedule(b, k, step // max(1, b // k) + 2, "per_epoch")
        return 0 if step == 0 else schedule.windows[step - 1][-1] + 1  # right, but accumlab's
    finally:
        sys.modules.pop("mine_counters", None)


def _in_a_raw_thread(start, step, b, k):
    """_fresh_schedule run by `start` (a way to start a raw thread), its result waited for."""
    out, done = [], threading.Event()

    def work():
        try:
            out.append(_fresh_schedule(b, k, step))
        finally:
            done.set()

    start(work, ())
    done.wait(30)
    return out[0] if out else 0


def _position_through_threadings_binding(step, b, k):
    """threading's own binding of _thread.start_new_thread, taken at import (an adversarial read)."""
    return _in_a_raw_thread(threading._start_new_thread, step, b, k)


def _position_profile_off_and_back(step, b, k):
    """sys.setprofile(None) around the call, the watch put back before returning."""
    watch = sys.getprofile()
    sys.setprofile(None)
    try:
        return _fresh_schedule(b, k, step)
    finally:
        sys.setprofile(watch)


def _position_in_a_raw_thread(step, b, k):
    """accumlab's schedule run by _thread.start_new_thread, which threading.setprofile never
    reaches (an adversarial read)."""
    import _thread

    return _in_a_raw_thread(_thread.start_new_thread, step, b, k)


class _PositionInAWorker:
    """accumlab's schedule in a worker process, the answer forwarding its arguments through a
    Pipe: the profile that watches the answer sees only this process."""

    def __init__(self):
        self.conn = None

    def __call__(self, step, b, k):
        if self.conn is None:
            self.conn, theirs = multiprocessing.get_context("fork").Pipe()
            multiprocessing.get_context("fork").Process(
                target=_serve, args=(theirs,), daemon=True
            ).start()
        self.conn.send((step, b, k))
        return self.conn.recv()


def _serve(conn):
    # forked inside the check: the watch and the guards on position_after came along
    sys.setprofile(None)
    while True:
        step, b, k = conn.recv()
        windows = _COPIED(b, k, step // max(b // k, 1) + 1, "per_epoch").windows
        conn.send(windows[step - 1][-1] + 1 if step else 0)


def _position_epochs_first(step, batches_per_epoch, k):
    # another form: every whole epoch read, then k per step into the epoch in progress
    per_epoch = batches_per_epoch // k
    whole = max(step - 1, 0) // per_epoch if per_epoch else 0
    return whole * batches_per_epoch + (step - whole * per_epoch) * k


# made with accumlab before the check, as a learner's earlier cell would: every (b, k) the
# lesson's cases use and many more (b ≤ 120, k ≤ 8, 4 epochs); the check's own code never runs
# accumlab then, so only cases it draws at check time can tell this table from arithmetic
_TABLE: dict = {}


def _fill_table():
    for b in range(1, 121):
        for k in range(1, 9):
            s = counters.step_schedule(b, k, 4, "per_epoch")
            _TABLE[(b, k)] = [s.position_after(i) for i in range(s.steps + 1)]


_fill_table()


def _position_from_table(step, batches_per_epoch, k):
    return _TABLE[(batches_per_epoch, k)][step]


RIGHT = {
    "10.1": [
        ("numpy integers", (np.int64(96), np.int64(90))),
        ("a list of 0-d tensors", [torch.tensor(96), torch.tensor(90)]),
        ("floats", (96.0, 90.0)),
    ],
    "10.2": [
        ("numpy and int", (np.int64(16), 31, 46)),
        ("a list", [16, 31, 46]),
        ("a 1-d tensor", torch.tensor([16, 31, 46])),
        ("floats", (16.0, 31.0, 46.0)),
        ("in another order", (46, 16, 31)),
        ("a set of steps", {16, 31, 46}),
        ("a frozenset", frozenset({16, 31, 46})),
    ],
    "10.3": [
        ("walking the windows", _position_by_walking),
        ("returning numpy integers", _position_numpy),
        ("counting whole epochs first", _position_epochs_first),
    ],
}

WRONG = {
    "10.1": [
        ("micro-batches, not steps", (750, 720)),
        ("the lesson's run", (78, 78)),
        ("rounded up once for the whole run", (94, 90)),
        ("one step more than batches // k per epoch", (96, 93)),
        ("only the first case", 96),
    ],
    "10.2": [
        ("the lesson's run", (26, 51, 76)),
        ("counted from 0", (15, 30, 45)),
        ("the carried window counted as an extra step", (16, 32, 48)),
        ("the counter over the whole run (global)", (16, 32, 47)),
        ("a step for every epoch's leftovers", (17, 33, 49)),
        ("k = 8 and 3 epochs", (32, 63)),
        ("a set of the wrong steps", {16, 32, 47}),
    ],
    "10.3": [
        ("accumlab's position_from_step", _position_library),
        ("accumlab's Schedule", _position_schedule),
        ("accumlab's Schedule.windows, position_after inlined", _position_windows),
        ("accumlab's Schedule.ends_window, summed", _position_ends),
        ("the audit's reference positions", _position_audit_spec),
        ("the audit's reference windows, the full ones", _position_audit_windows),
        ("accumlab's step_schedule, its code copied", _position_code_copy),
        ("accumlab's step_schedule, copied under another file name", _position_code_copy_elsewhere),
        ("accumlab's step_schedule, the profiler switched off", _position_profile_off),
        ("accumlab's step_schedule in a thread", _position_in_a_thread),
        ("accumlab's step_schedule in a threading.Thread", _position_in_a_plain_thread),
        ("accumlab's step_schedule in a _thread thread", _position_in_a_raw_thread),
        ("through threading's binding of _thread", _position_through_threadings_binding),
        ("the profile switched off and put back", _position_profile_off_and_back),
        ("accumlab's step_schedule in a worker process", _PositionInAWorker()),
        (
            "the Trainer's rule of the lesson, for a loop that steps at epoch ends",
            _position_trainer_rule,
        ),
        ("forgetting the × k", _position_without_k),
        ("a table made with accumlab before the check", _position_from_table),
    ],
}


def _resume_position_stub(step, batches_per_epoch, k): ...


STUBS = {
    "10.1": [("the cell as handed out", None)],
    "10.2": [("the cell as handed out", None)],
    "10.3": [("an empty body", _resume_position_stub)],
}

# words the hint of a listed wrong answer must contain
HINTS = {
    "one step more than batches // k per epoch": "when k divides the epoch",
    "a table made with accumlab before the check": "KeyError",
    "the counter over the whole run (global)": "`global`",
    "the carried window counted as an extra step": "not an extra one",
    "accumlab's step_schedule in a worker process": "another process",
}


def _ceil_rule(step, b, k):
    """The Trainer's ⌈b / k⌉ steps per epoch, written by hand: wrong for this loop, and no call
    into accumlab (its hint must name the rule, not a call)."""
    import math

    if step == 0:
        return 0
    epoch, j = divmod(step - 1, math.ceil(b / k))
    return epoch * b + min((j + 1) * k, b)


WRONG["10.3"].append(("the ⌈b / k⌉ rule by hand", _ceil_rule))
HINTS["the ⌈b / k⌉ rule by hand"] = "the Trainer's rule"

RIGHT["10.2"].append(("a range of the three steps", range(16, 47, 15)))


def _right_from_the_callers_frame(step, batches_per_epoch, k):
    """Reads the checker's right position out of a calling frame, if one holds it."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        if isinstance(frame.f_locals.get("right"), int):
            return frame.f_locals["right"]
        frame = frame.f_back
    return 0


WRONG["10.3"].append(
    ("the right position read from a caller's frame", _right_from_the_callers_frame)
)
