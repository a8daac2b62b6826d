"""What `al.check` needs around a learner's answer: a time limit, and telling a stub from an answer.

The time limit. An answer runs in the caller's thread — in Jupyter, the kernel's main thread, where
ipykernel executes cells — so stopping it means raising an exception inside that thread while it
runs. A timer signal does that: `signal.setitimer` delivers SIGALRM after the limit, and Python
runs the handler in the main thread between two bytecodes of the interrupted code, where it
raises `AnswerTimeout`. It also ends a blocking wait such as `time.sleep` (PEP 475: a handler
that raises interrupts the call). The handler raises only while the answer's frame is on the
stack, so an alarm that fires just as the answer returns cannot escape into the notebook.
Rejected alternatives: a subprocess could stop anything, but answers are closures over notebook
objects and must change the model the checker then inspects; a thread with `join(timeout)` returns
but leaves the loop burning a core; `sys.settrace` slows every line of the answer several-fold
and replaces a debugger's tracer.
Where signals cannot be used (a check called from another thread, or a platform without
setitimer such as Windows) a watchdog thread raises `AnswerTimeout` in the answer's thread with
`PyThreadState_SetAsyncExc`: the same "between two bytecodes", but a blocking call (a long sleep)
is interrupted only when it returns.
What no in-process limit can stop: one long C call (a single huge matrix product) runs to its
end before any handler, and an answer whose loop catches BaseException (a bare `except:`)
swallows the stop each time it comes (the alarm repeats every 0.25 s, in case it is swallowed once).
"""

from __future__ import annotations

import ctypes
import dis
import signal
import threading
import time


class AnswerTimeout(BaseException):
    """Raised inside an answer whose time is up. A BaseException, like KeyboardInterrupt, so the
    answer's own `except Exception:` cannot swallow it."""


def call_within(seconds: float, fn, *args):
    """`fn(*args)`, stopped with AnswerTimeout once it has run for `seconds`."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        return _with_alarm(seconds, fn, args)
    return _with_watchdog(seconds, fn, args)


def _answer_frame(fn, args):
    return fn(*args)  # the frame the alarm looks for on the stack


def _with_alarm(seconds: float, fn, args):
    def on_alarm(signum, frame):
        while frame is not None:
            if frame.f_code is _answer_frame.__code__:
                raise AnswerTimeout
            frame = frame.f_back
        # not inside the answer any more (it returned a moment ago): nothing to stop

    # a limit around this one that ends sooner (al.check's, around al.frameworks.run_loop's)
    # still holds: fire at whichever comes first
    pending = signal.getitimer(signal.ITIMER_REAL)[0]
    first = min(seconds, pending) if pending else seconds
    previous = signal.signal(signal.SIGALRM, on_alarm)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, first, 0.25)
    started = time.monotonic()
    try:
        return _answer_frame(fn, args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
        if old_delay:  # someone else's timer was running: give it back what is left of it
            left = max(old_delay - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)


def _with_watchdog(seconds: float, fn, args):
    target = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    state = {"inside": True}
    done = threading.Event()

    def watch():
        if done.wait(seconds):
            return
        with lock:
            if state["inside"]:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(AnswerTimeout))

    threading.Thread(target=watch, daemon=True, name="al.check time limit").start()
    try:
        return _answer_frame(fn, args)
    finally:
        done.set()
        with lock:
            state["inside"] = False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)  # drop one not yet raised


def is_stub(answer) -> bool:
    """True for a function whose body does nothing: only `...`, `pass`, a docstring or
    `return None` — the stub an exercise hands out, not yet filled in."""
    code = getattr(answer, "__code__", None)
    if code is None or not hasattr(code, "co_code"):
        return False
    for ins in dis.get_instructions(code):
        if ins.opname in ("RESUME", "NOP", "CACHE", "RETURN_VALUE"):
            continue
        if ins.opname in ("LOAD_CONST", "RETURN_CONST") and ins.argval in (None, Ellipsis):
            continue
        return False
    return True
