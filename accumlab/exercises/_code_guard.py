"""Seeing a refused function's code run, whatever function object runs it. Part of `Refuse`
(`_calls`): a guard on accumlab's bindings of a function, and on its `__code__`, misses a copy made
before the check — `types.FunctionType(f.__code__, f.__globals__)` holds the original code object,
and `exec(inspect.getsource(f), ...)` compiles a new one from the same text. While an answer runs,
`CodeWatch` sees every Python call (a profile function) and hands each whose code is one of the
refused ones, by `code_key`, to a judge that lets accumlab's own calls through and refuses others.

    watch = CodeWatch({noise_scale.__code__: "al.scale.noise_scale"}, judge).start()
    try:
        answer(grads)  # judge(frame, "al.scale.noise_scale") on each call of that code
    finally:
        still_on = watch.stop()  # False: something switched the profile function off meanwhile

Why a profile function and not `sys.settrace`: a tracer is what debuggers and coverage use, and a
profile function chains with an earlier one here (each event is passed on to it).
"""

from __future__ import annotations

import dis
import os
import sys
import sysconfig
import threading
from types import CodeType


def code_key(code, nested: bool = False) -> tuple:
    """What a function computes, without where it was written: bytecode, names and constants,
    nested code objects (a generator expression's) by their names and constants (their bytecode
    differs when the source is compiled again elsewhere)."""
    consts = tuple(code_key(c, True) if isinstance(c, CodeType) else c for c in code.co_consts)
    return (code.co_names, consts) if nested else (code.co_code, code.co_names, consts)


def _watch_key(code) -> tuple:
    # names and constants (nested code by its own), and the local names: a copy keeps them all,
    # and a learner's few lines rarely name everything alike and in the same order
    return code_key(code, True), code.co_varnames, code.co_argcount, code.co_kwonlyargcount


_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


def _shape(code) -> list:
    """The instructions of `code` as the same source compiles anywhere: a call of an imported
    module's function (`torch.cat(...)`) compiles to LOAD_ATTR in the file that imports the
    module and to LOAD_METHOD elsewhere (an `exec` of the function's source); jumps are counted
    in instructions, since the two differ in cache entries."""
    ops = list(dis.get_instructions(code))
    at = {op.offset: n for n, op in enumerate(ops)}
    shape = []
    for op in ops:
        name, arg = op.opname, op.arg
        if name == "LOAD_METHOD":
            name = "LOAD_ATTR"
        elif name == "LOAD_GLOBAL":
            arg >>= 1  # its low bit: a NULL pushed before the function, as LOAD_METHOD does
        elif op.opcode in _JUMPS:
            arg = at.get(op.argval)
        shape.append((name, arg))
    return shape


def _match(code, candidates) -> str | None:
    """The name of the refused code `code` is a copy of, among `candidates`, or None."""
    for refused, name in candidates:
        if code is refused:
            return name
        if _watch_key(code) == _watch_key(refused) and _shape(code) == _shape(refused):
            return name
    return None


def unwatched_threads() -> list[str]:
    """The names of threads already running whose stack holds the learner's code (a file outside
    Python's own library, the installed packages and accumlab): a profile function set now never
    reaches a thread started earlier (Python 3.11 has no `threading.setprofile_all_threads`), so
    what such a thread runs while the answer is checked is not seen. A kernel's own threads
    (ipykernel, zmq, tqdm) run library code only."""
    paths = sysconfig.get_paths()
    library = tuple(
        os.path.abspath(paths[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")
    )
    library += (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)
    # every thread the interpreter runs, also one started with _thread, which threading does
    # not list
    names = {t.ident: t.name for t in threading.enumerate()}
    found = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        while frame is not None:
            name = frame.f_code.co_filename
            if not name.startswith("<frozen") and not os.path.abspath(name).startswith(library):
                found.append(names.get(ident, f"a thread started with _thread ({ident})"))
                break
            frame = frame.f_back
    return found


def refuse_unwatched_threads(hint) -> None:
    """Raise `hint(...)` when a thread started before the check runs the learner's code."""
    running = unwatched_threads()
    if running:
        raise hint(
            f"a thread your code started before al.check is still running ({running[0]}): "
            "al.check cannot see what it computes. Stop it (or restart the kernel) and check again"
        )


class CodeWatch:
    """While started, every Python call whose code matches one of `codes` (code object -> the
    name to report) — the same code object, or one with the same names, constants, local names
    and instructions (`_shape`) — is passed to `judge(frame, name)`, which returns to let it run
    or raises to stop it before its first line. The calling thread is watched, and the threads
    started meanwhile (`threading.setprofile`)."""

    def __init__(self, codes: dict, judge):
        # the global and attribute names a code uses (a tuple the code object holds): a sieve
        # that costs one lookup; the rest is compared only for the few codes that pass it
        self._by_names: dict = {}
        for code, name in codes.items():
            self._by_names.setdefault(code.co_names, []).append((code, name))
        self._judge = judge
        self._profile = None

    def start(self) -> CodeWatch:
        by_names, judge = self._by_names, self._judge
        # id(code) -> (code, name or None), each code object judged once; holding the code keeps
        # its id from being reused by another while the watch is on
        seen: dict = {}
        previous = sys.getprofile()
        if previous is not None and not callable(previous):
            return self  # a profiler in C (cProfile) cannot be handed back by sys.setprofile

        # every call, return and C call of the watched threads runs this: as little as it can
        def profile(frame, event, arg):
            if event == "call":
                code = frame.f_code
                known = seen.get(id(code))
                if known is None:
                    candidates = by_names.get(code.co_names)
                    known = seen[id(code)] = (code, candidates and _match(code, candidates))
                if known[1]:
                    judge(frame, known[1])

        def chained(frame, event, arg):
            profile(frame, event, arg)
            previous(frame, event, arg)

        watch = profile if previous is None else chained
        self._previous = previous, threading.getprofile()
        self._profile = watch
        sys.setprofile(watch)
        threading.setprofile(watch)
        return self

    def stop(self) -> bool:
        """Hand the profile functions back; whether this watch was still the calling thread's
        (False after a judge raised: Python switches a profile function off when it raises)."""
        if self._profile is None:
            return True
        still_on = sys.getprofile() is self._profile
        sys.setprofile(self._previous[0])
        threading.setprofile(self._previous[1])
        self._profile = None
        return still_on
