"""Bounds on a learner's loop: a wall-clock deadline and a budget of calls (lesson 08).

Why a trace function, not a thread or only an alarm. A Python thread cannot be killed, so a loop
that never returns would keep burning a core after the audit gave up on it; `signal.alarm` exists
only in the main thread and on POSIX, and its exception can land anywhere, inside torch or inside
the audit's own bookkeeping. `sys.settrace` works in any thread and on every OS: the deadline is
checked at every function call, and at every bytecode of the learner's own frames (a one-line
`while True: pass` emits no line events, only opcode events), so the exception is raised at a line
of the learner's code. Library frames (torch, the standard library, site-packages, accumlab) run
untraced, which keeps the overhead to about a third of a tiny loop's time.

Raising from a trace function unsets it (that is how `pdb` quits, too). So a loop that catches
BaseException and carries on, or one blocked in a single C call (`time.sleep`), would escape; in the
main thread on POSIX an interval alarm backs the trace up a moment after the deadline, for those.
"""

from __future__ import annotations

import os
import signal
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

GRACE = 0.5  # seconds the trace has to stop the loop before the alarm fires
ALARM_INTERVAL = 0.25  # the alarm repeats: a loop that swallows one exception meets the next


class AuditStopped(BaseException):
    """Raised inside a learner's loop to stop it. A BaseException, so that `except Exception`
    in the loop does not swallow it."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason, detail)
        self.reason = reason  # "time", or what ran past its budget: "forwards", "steps", ...
        self.detail = detail


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__))}
    roots |= {
        paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths
    }
    return tuple(sorted(roots))


@contextmanager
def deadline(seconds: float, learner_files: tuple[str, ...] = ()) -> Iterator[None]:
    """Raise AuditStopped("time") in the code run inside the block once `seconds` have passed.
    `learner_files` are traced line by line even when they sit under a library root (the
    catalogue's loops live inside accumlab)."""
    end = time.monotonic() + seconds
    roots = _library_roots()
    is_library: dict[str, bool] = dict.fromkeys(learner_files, False)

    def stop():
        raise AuditStopped("time", f"{seconds:g} s")

    def local(frame, event, arg):
        if time.monotonic() > end:
            stop()
        return local

    def on_call(frame, event, arg):
        if time.monotonic() > end:
            stop()
        name = frame.f_code.co_filename
        library = is_library.get(name)
        if library is None:
            library = is_library[name] = name.startswith(roots)
        if library:
            return None
        frame.f_trace_opcodes = True  # catches loops with no line events, see the module docstring
        return local

    previous_trace = sys.gettrace()
    alarm = _Alarm(seconds + GRACE, stop)
    sys.settrace(on_call)
    alarm.start()
    try:
        yield
    finally:
        alarm.stop()
        sys.settrace(previous_trace)


class _Alarm:
    """The main-thread backstop: an interval timer whose handler raises the same exception. Armed
    only when nobody else uses SIGALRM, and restored exactly afterwards."""

    def __init__(self, seconds: float, stop):
        self.seconds, self.stop_fn = seconds, stop
        self.armed = False
        self.previous = None

    def _usable(self) -> bool:
        return (
            hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)
            and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        )

    def start(self) -> None:
        if not self._usable():
            return
        self.previous = signal.signal(signal.SIGALRM, lambda signum, frame: self.stop_fn())
        signal.setitimer(signal.ITIMER_REAL, self.seconds, ALARM_INTERVAL)
        self.armed = True

    def stop(self) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
            signal.signal(signal.SIGALRM, self.previous)
            self.armed = False


class Budget:
    """Counts the instrumented calls a loop makes (forwards, optimizer steps, zero_grad, scheduler
    and scaler calls) and stops the loop when one kind runs far past what the data allows."""

    def __init__(self, limits: dict[str, int]):
        self.limits = limits
        self.counts = dict.fromkeys(limits, 0)

    def spend(self, kind: str) -> None:
        self.counts[kind] += 1
        if self.counts[kind] > self.limits[kind]:
            raise AuditStopped(kind, f"more than {self.limits[kind]}")
