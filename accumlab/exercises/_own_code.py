"""What exercise 10.3 watches while an answer runs: accumlab's own code, recognised by where it
lives or by a copy of its bytecode, in the answer's thread, the threads it starts and the
workers of a thread pool started before the check."""

from __future__ import annotations

import os
import sys
import threading
import types

from ._answers import Hint
from ._calls import code_key


class OwnCode:
    """Recognises accumlab's own code while an answer runs (10.3 asks for arithmetic the learner
    writes, so any of it is accumlab's answer): a frame from a file of the package — the
    schedules, the audit's reference windows, any other helper — and a copy of one of its code
    objects made outside it (`code.replace(co_name=..., co_filename=...)` keeps the bytecode, its
    constants and names; only functions and methods of some length are matched this way, so that
    a learner's one-line helper never matches a one-line helper of accumlab's). Allowed: the
    checker machinery (accumlab/exercises/), the lazy name tables (`__init__.py`, `_lazy.py`)
    that `al.<topic>.<name>` runs through. Refused too: talking to another process through
    multiprocessing, concurrent.futures or subprocess (a worker started before the check can run
    accumlab where this profile cannot see it). A channel made of raw `os` calls or sockets is
    not recognised: a limit of watching one process."""

    def __init__(self):
        import accumlab

        self.package = os.path.dirname(os.path.abspath(accumlab.__file__)) + os.sep
        self.elsewhere = _other_process_modules()
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
        # a refused function's guard (`Refuse._guard_code`) is made inside a factory
        name = getattr(code, "co_qualname", code.co_name).replace("__factory__.<locals>.", "")
        return f"accumlab's {name} (accumlab/{where})"

    def label(self, code) -> str | None:
        """Why `code` is accumlab's own, or None."""
        if code not in self.seen:
            path = os.path.abspath(code.co_filename)
            name = os.path.basename(path)
            if path.startswith(self.package):
                own = not path.startswith(self.allowed) and name not in ("__init__.py", "_lazy.py")
                self.seen[code] = self._label(code) if own else None
            elif path.startswith(self.elsewhere):
                self.seen[code] = (
                    f"{getattr(code, 'co_qualname', code.co_name)} ({name}): another process, "
                    "whose code al.check cannot see"
                )
            else:
                self.seen[code] = self.keys.get(_key(code))
        return self.seen[code]

    def _learners(self, frame) -> bool:
        """Whether `frame` runs the learner's code: not accumlab's (its own watches set profiles)
        nor Python's library (a new thread's bootstrap hands it the profile)."""
        import sysconfig

        paths = sysconfig.get_paths()
        library = tuple(os.path.abspath(paths[k]) + os.sep for k in ("stdlib", "platstdlib"))
        name = os.path.abspath(frame.f_code.co_filename) if frame is not None else self.package
        return not name.startswith((self.package, *library))

    def calls(self, fn, *args):
        """Run `fn(*args)`; return its result and the accumlab code it ran."""
        ran: list[str] = []
        on = [True]  # off while the watch itself is taken down
        switch = "{}, which stops al.check seeing what your answer runs"

        def profile(frame, event, arg):
            if not on[0]:
                return
            if event == "call":
                label = self.label(frame.f_code)
                if label is not None:
                    ran.append(label)
                elif frame.f_code is threading.setprofile.__code__ and self._learners(frame.f_back):
                    ran.append(switch.format("threading.setprofile"))  # off for new threads
            elif event == "c_call" and arg is sys.setprofile and self._learners(frame):
                ran.append(switch.format("sys.setprofile"))  # off, even if put back at once

        import _thread
        import concurrent.futures.thread as pools

        handed, start_raw = pools._WorkItem.run, _thread.start_new_thread
        start_raw_alias = getattr(_thread, "start_new", start_raw)  # its old name

        def watched(item):  # a pool's worker started before the check runs its items profiled
            before = sys.getprofile()
            sys.setprofile(profile)
            try:
                return handed(item)
            finally:
                sys.setprofile(before)

        def raw(function, args, kwargs=None):  # threading.setprofile never reaches _thread's
            def profiled(*a, **k):
                sys.setprofile(profile)
                try:
                    return function(*a, **k)
                except Hint:  # a refusal: it reaches the answer through what the watch saw
                    return None

            return start_raw(profiled, args, kwargs or {})

        previous, previous_threads = sys.getprofile(), threading.getprofile()
        sys.setprofile(profile)
        threading.setprofile(profile)  # threads the answer starts are profiled too
        pools._WorkItem.run, _thread.start_new_thread, _thread.start_new = watched, raw, raw
        threading._start_new_thread = raw  # threading's own binding of it, made at import
        try:
            result = fn(*args)
            if sys.getprofile() is not profile:  # the answer switched the watch off
                ran.append(switch.format("sys.setprofile"))
        finally:
            on[0] = False
            pools._WorkItem.run, _thread.start_new_thread = handed, start_raw
            _thread.start_new, threading._start_new_thread = start_raw_alias, start_raw
            sys.setprofile(previous)
            threading.setprofile(previous_threads)
        return result, ran


_CHECKERS = "accumlab.exercises"


def _other_process_modules() -> tuple[str, ...]:
    """Where the standard library's ways of handing work to another process live."""
    import concurrent.futures.process
    import multiprocessing
    import subprocess

    return (
        os.path.dirname(os.path.abspath(multiprocessing.__file__)) + os.sep,
        os.path.abspath(concurrent.futures.process.__file__),
        os.path.abspath(subprocess.__file__),
    )


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
