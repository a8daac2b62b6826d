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
swallows the stop each time it comes (the alarm and the watchdog repeat every 0.25 s, in case it is
swallowed once).
Limits nest: a check run inside a caller's shorter limit (a lesson's `run_loop`, a test harness) is
stopped when the caller's limit ends, and the AnswerTimeout says so (`ours = False`, with the
seconds it ran) instead of claiming the check's own, longer limit ran out.
"""

from __future__ import annotations

import ctypes
import dis
import functools
import inspect
import signal
import threading
import time


class AnswerTimeout(BaseException):
    """Raised inside an answer whose time is up. A BaseException, like KeyboardInterrupt, so the
    answer's own `except Exception:` cannot swallow it.

    `call_within` fills in, as it passes through: `elapsed` (seconds the answer ran), `limit` (its
    own limit) and `ours` — False when the stop came from a limit of the code around the call that
    ended sooner (a lesson's `run_loop`, a test harness), so a message can say when and why the
    answer really stopped."""

    elapsed: float = 0.0
    limit: float = 0.0
    ours: bool = True


def call_within(seconds: float, fn, *args):
    """`fn(*args)`, stopped with AnswerTimeout once it has run for `seconds` (or sooner, when a
    time limit around this call ends first: then the AnswerTimeout says `ours = False`)."""
    started = time.monotonic()
    fired = {"ours": False}
    try:
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
            return _with_alarm(seconds, fn, args, fired)
        return _with_watchdog(seconds, fn, args, fired)
    except AnswerTimeout as stop:
        stop.elapsed = time.monotonic() - started
        stop.limit = seconds
        stop.ours = fired["ours"]
        raise


def _answer_frame(fn, args):
    return fn(*args)  # the frame the alarm looks for on the stack


def _with_alarm(seconds: float, fn, args, fired: dict):
    def on_alarm(signum, frame):
        while frame is not None:
            if frame.f_code is _answer_frame.__code__:
                # our own limit, or the shorter one around us that took the timer's place
                fired["ours"] = time.monotonic() >= deadline
                raise AnswerTimeout
            frame = frame.f_back
        # not inside the answer any more (it returned a moment ago): nothing to stop

    # a limit around this one that ends sooner (al.check's, around al.frameworks.run_loop's)
    # still holds: fire at whichever comes first
    pending = signal.getitimer(signal.ITIMER_REAL)[0]
    first = min(seconds, pending) if pending else seconds
    previous = signal.signal(signal.SIGALRM, on_alarm)
    started = time.monotonic()
    deadline = started + seconds - 1e-3  # setitimer never fires early; 1 ms for clock reads
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, first, 0.25)
    try:
        return _answer_frame(fn, args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
        if old_delay:  # someone else's timer was running: give it back what is left of it
            left = max(old_delay - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)


def _with_watchdog(seconds: float, fn, args, fired: dict):
    target = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    state = {"inside": True}
    done = threading.Event()

    def watch():
        wait = seconds
        # repeat every 0.25 s, as the alarm does: an answer (or an al.check inside it, catching the
        # stop meant for this limit) may swallow one
        while not done.wait(wait):
            with lock:
                if not state["inside"]:
                    return
                fired["ours"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(AnswerTimeout))
            wait = 0.25

    threading.Thread(target=watch, daemon=True, name="al.check time limit").start()
    try:
        return _answer_frame(fn, args)
    finally:
        done.set()
        with lock:
            state["inside"] = False
        _drain_late_stop()


def _drain_late_stop() -> None:
    """Receive, and drop, an AnswerTimeout the watchdog sent just as the answer returned.

    Not `PyThreadState_SetAsyncExc(target, None)`: on CPython 3.11 clearing that way leaves the
    interpreter's "async exception pending" flag set with nothing to deliver, and afterwards any
    thread running under `sys.settrace` (al.audit's deadline) hangs at its next call (reproduced:
    tests/test_exercise_machinery.py, `test_watchdog_leaves_no_pending_stop`). Letting the exception
    arrive clears the flag the normal way; it lands at one of this loop's backward jumps."""
    try:
        for _ in range(1000):
            pass
    except AnswerTimeout:
        pass


# bytecode that carries no step of an answer: the frame's set-up and the call machinery around
# `raise NotImplementedError("...")` (PRECALL in 3.11, KW_NAMES for keyword arguments)
_NOISE = {"RESUME", "NOP", "CACHE", "EXTENDED_ARG", "PUSH_NULL", "PRECALL", "CALL", "KW_NAMES"}


def _code_is_stub(code) -> bool:
    """A body of only `...`, `pass`, a docstring, `return None` or `raise NotImplementedError`
    (with or without a message)."""
    ops = [(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname not in _NOISE]
    if code.co_flags & inspect.CO_COROUTINE and ops[:2] == [
        ("RETURN_GENERATOR", None),
        ("POP_TOP", None),
    ]:
        ops = ops[2:]  # `async def`: the coroutine's set-up, before the body
    if all(
        op == "RETURN_VALUE" or (op in ("LOAD_CONST", "RETURN_CONST") and arg in (None, Ellipsis))
        for op, arg in ops
    ):
        return True
    return (
        len(ops) >= 2
        and ops[0] in (("LOAD_GLOBAL", "NotImplementedError"), ("LOAD_NAME", "NotImplementedError"))
        and ops[-1][0] == "RAISE_VARARGS"
        and all(op == "LOAD_CONST" and isinstance(arg, (str, type(None))) for op, arg in ops[1:-1])
    )


def _function_is_stub(fn) -> bool:
    code = getattr(fn, "__code__", None)
    return code is not None and hasattr(code, "co_code") and _code_is_stub(code)


def _class_is_stub(cls: type) -> bool:
    """A class whose own methods are all stubs and whose bases are `object` or stubs themselves:
    `class Wrapper: pass` is one, but `class Mine(torch.optim.SGD): pass` is an answer, and so is
    a subclass of a written answer that stubs one method out (`def zero_grad(self): pass` is a
    wrong answer, owed a hint)."""
    if not all(base is object or _class_is_stub(base) for base in cls.__bases__):
        return False
    methods = []
    for name, value in vars(cls).items():
        if name.startswith("__") and name.endswith("__") and not callable(value):
            continue  # __module__, __qualname__, __doc__, __dict__, __weakref__
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            methods += [f for f in (value.fget, value.fset, value.fdel) if f is not None]
        elif callable(value):
            methods.append(value)
        else:
            return False  # a class attribute holding data is part of an answer
    return all(_function_is_stub(m) for m in methods)


def is_stub(answer) -> bool:
    """True for an answer not given yet, in every shape an exercise cell hands out or a learner
    types as a placeholder:

    - `None` and `...`;
    - a function or lambda whose body does nothing: only `...`, `pass`, a docstring,
      `return None`, or `raise NotImplementedError` (with or without a message);
    - a class whose own methods are all such stubs (`__init__` included), or an empty class
      with no base but `object`;
    - a tuple or list holding only `None` / `...` (`(None, None)` for "(micro_batch_size, k)");
    - `async def` stubs, a `functools.partial` of a stub, an instance whose class's `__call__` is one.

    Not stubs, because each can be a real answer: an empty tuple, list, set, dict or string ("no
    node", "none of them"), 0, False, and a function with any other statement, even a wrong one
    (a lesson's "fix me" starting code gets a hint, not "not answered yet").
    """
    if answer is None or answer is Ellipsis:
        return True
    if isinstance(answer, (tuple, list)):
        return len(answer) > 0 and all(a is None or a is Ellipsis for a in answer)
    if isinstance(answer, type):
        return _class_is_stub(answer)
    if isinstance(answer, functools.partial):
        return is_stub(answer.func)
    if not hasattr(answer, "__code__") and callable(answer):
        # an instance of a class whose __call__ is a stub (`C()` with `def __call__(self): ...`)
        return _function_is_stub(type(answer).__call__)
    return _function_is_stub(answer)
