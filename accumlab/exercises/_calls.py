"""Calls an answer makes: counting calls to one API, and refusing accumlab's own implementation of
the answer. Part of the answer instrumentation in `_observe` (which re-exports both names); used by
the checkers of lessons 02, 03, 04, 06, 10, 11 and 12.

    with Spy(accelerator, "backward", "accelerator.backward") as spy:
        answer(accelerator, model, optimizer, scheduler, loader, 4)
    if spy.calls == 0:
        raise Hint(spy.sentence(expected=8) + ": the framework's backward scales and syncs")

    with Refuse("al.scale.noise_scale"):
        b = answer(grads)   # a call raises Hint("this exercise asks you to write it yourself — ...")
"""

from __future__ import annotations

import functools
import importlib
import inspect
import itertools
import os
import sys
import threading
import types

from ._answers import Hint
from ._code_guard import CodeWatch, code_key, refuse_unwatched_threads  # noqa: F401 (code_key: 07.4 and 10.3 use it)


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 forward', '4 forwards'; `many` for irregular plurals ('backward passes')."""
    return f"{n} {word if n == 1 else many or word + 's'}"


class Spy:
    """`with Spy(accelerator, "backward", "accelerator.backward") as spy: answer(...)`: counts the
    calls to `owner.name` (still calling through); `spy.calls`, `spy.sentence(4)` → "your answer
    called accelerator.backward 0 times (4 expected)". Works on instances, classes
    (`Spy(torch.Tensor, "backward")`) and modules; restores the attribute afterwards."""

    def __init__(self, owner, name: str, label: str | None = None):
        self.owner, self.name = owner, name
        self.label = label or f"{getattr(owner, '__name__', type(owner).__name__)}.{name}"
        self.calls = 0

    def __enter__(self) -> Spy:
        self._own = self.name in getattr(self.owner, "__dict__", {})
        self._before = self.owner.__dict__[self.name] if self._own else None
        original = getattr(self.owner, self.name)

        @functools.wraps(original)
        def counted(*args, **kwargs):
            self.calls += 1
            return original(*args, **kwargs)

        setattr(self.owner, self.name, counted)
        return self

    def __exit__(self, *exc) -> None:
        if self._own:
            setattr(self.owner, self.name, self._before)
        else:
            delattr(self.owner, self.name)

    def sentence(self, expected: int | None = None) -> str:
        said = f"your answer called {self.label} {plural(self.calls, 'time')}"
        return said + ("" if expected is None else f" ({expected} expected)")


def _accumlab_modules() -> list:
    return [m for n, m in list(sys.modules.items()) if n.split(".")[0] == "accumlab" and m]


def _resolve(name: str):
    import accumlab

    if not name.startswith("al."):
        raise ValueError(
            f"name accumlab callables as 'al.<name>' or 'al.<topic>.<name>', got {name!r}"
        )
    value = accumlab
    for part in name.split(".")[1:]:
        try:
            value = getattr(value, part)
        except AttributeError:  # a submodule not imported yet (`al.audit.loops`)
            if not isinstance(value, types.ModuleType):
                raise
            value = importlib.import_module(f"{value.__name__}.{part}")
    return value


def _holds(value, ids: set, depth: int = 0) -> bool:
    """Whether `value` is one of the objects in `ids`, or carries one: a partial's function or
    arguments, a bound method's function or instance class, the items of an argument tuple; a
    function whose code object is in `ids`."""
    if depth > 3:
        return False
    if id(value) in ids or isinstance(value, types.FunctionType) and id(value.__code__) in ids:
        return True  # the object, or a copy of a refused function holding its code
    if isinstance(value, functools.partial):
        inner = [value.func, *value.args, *value.keywords.values()]
    elif isinstance(value, types.MethodType):
        inner = [value.__func__, type(value.__self__)]
    elif isinstance(value, (tuple, list)) and len(value) <= 16:
        inner = list(value)
    elif isinstance(value, dict) and len(value) <= 16:
        inner = list(value.values())
    elif id(type(value)) in ids:
        inner = [type(value)]
    else:  # an instance whose class's __call__ is the refused function (staticmethod, partial)
        call = inspect.getattr_static(type(value), "__call__", None)
        inner = [getattr(call, "__func__", call)] if call is not None else []
    return any(_holds(v, ids, depth + 1) for v in inner)


def audit_loops() -> tuple[str, ...]:
    """Every training loop of lesson 08's gallery (`al.audit.loops`, `loops_epochs`,
    `loops_hidden`), as Refuse names: several are right in another exercise's setting (a clip at
    max_norm=inf, a scheduler that does nothing), so a "write the loop" exercise refuses them all."""
    import importlib

    names = []
    for module in ("loops", "loops_epochs", "loops_hidden"):
        mod = importlib.import_module(f"accumlab.audit.{module}")
        for name, value in vars(mod).items():
            if inspect.isfunction(value) and value.__module__ == mod.__name__:
                if not name.startswith("_"):
                    names.append(f"al.audit.{module}.{name}")
    return tuple(names)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_TRANSPARENT = {"contextlib", "functools"}  # modules whose frames only pass a call on
_GUARDS = itertools.count()  # a fresh handler name for each function guarded


class Refuse:
    """`with Refuse("al.full_batch_grads", "al.scale.noise_scale"): answer(...)`: while the block
    runs, a call to one of these from code outside accumlab (the learner's answer) raises
    `Hint("this exercise asks you to write it yourself — your answer called al.full_batch_grads")`.
    Every accumlab module's binding of the object is replaced (so `al.<topic>.<name>` and other
    spellings are caught too) and restored afterwards; calls from accumlab's own code pass through.
    A class is refused by its `__init__`. A function is refused at its code object too (its
    `__code__` is swapped for a guard while the block runs), so a name the learner bound before the
    check (`from accumlab.scale import noise_scale as ns`, a `functools.partial`) is caught as well,
    and a copy of its code made before the block or compiled again from its source is caught when
    it runs (`_code_guard.CodeWatch`, a profile function while the block runs).
    The hint is raised again when the block ends if the answer swallowed it (`except Exception:`)."""

    def __init__(self, *names: str):
        self.names = names
        self.called: list[str] = []

    def _guard(self, name: str, original, *, inner: bool = False):
        @functools.wraps(original)
        def refused(*args, **kwargs):
            if self._own_call(sys._getframe(1)):
                return original(*args, **kwargs)
            self.called.append(name)
            raise Hint(self.hint())

        # functools.wraps' way back to the unguarded function leads to a guard too
        del refused.__wrapped__
        if not inner:
            refused.__wrapped__ = self._guard(name, original, inner=True)
        return refused

    def _own_call(self, frame, code=None) -> bool:
        """True when accumlab's own code calls the refused object by name. A caller in accumlab
        that holds the object as a value (or a function running `code`, the refused code being
        called) was handed it by the answer — `call_within(30, fn, …)`, `measure_peak(fn)`, or the
        checker calling an answer that is `functools.partial(fn)` (a partial runs no Python frame
        of its own) — and that call is the answer's."""
        while frame is not None and frame.f_globals.get("__name__") in _TRANSPARENT:
            frame = frame.f_back  # a decorator's wrapper: the call is its caller's
        caller = frame.f_globals.get("__name__", "") if frame is not None else ""
        if not (caller == "accumlab" or caller.startswith("accumlab.")):
            return False
        if caller == __name__:
            return True  # another Refuse's guard (nested blocks): that guard judged the call
        held = set(map(id, self._targets))
        if code is not None:  # id(None) would match every local that is None
            held.add(id(code))
        # a local named as the function it holds is the caller's own import of it, not an answer
        own = frame.f_locals.items()
        return not any(_holds(v, held) for n, v in own if n != getattr(v, "__name__", None))

    def _judge(self, frame, name: str) -> None:
        """A call of a refused function's code (`CodeWatch`): a copy made before the block, or
        compiled again from its source, is refused as the function itself would be."""
        if not self._own_call(frame.f_back, frame.f_code):
            self.called.append(f"a copy of {name}")  # retyped or copied: its code, not it, ran
            raise Hint(self.hint())

    def _watch(self, name: str, fn) -> None:
        """Watch for `fn`'s own code (before it is swapped for a guard); a decorator's wrapper is
        not watched: its code is shared by every function it decorates."""
        if isinstance(fn, types.FunctionType) and not hasattr(fn, "__wrapped__"):
            if fn.__code__.co_filename.startswith(_PACKAGE):
                self._watched.setdefault(fn.__code__, name)

    def hint(self) -> str:
        return f"this exercise asks you to write it yourself — your answer called {self.called[0]}"

    def __enter__(self) -> Refuse:
        refuse_unwatched_threads(Hint)  # first: nothing is guarded yet, so nothing to undo
        # a refusal raised in a thread the answer started ends that thread; the hint comes back
        # to the answer through `called`, so Python's traceback of it would only be noise
        self._excepthook = threading.excepthook
        threading.excepthook = self._quiet_refusals
        self._undo: list[tuple[type, str, object]] = []  # classes: their own __init__ or None
        self._guards: dict = {}  # id(guard) -> (guard, the function it stands for)
        self._codes: list = []  # (function, its own code, the handler's global name)
        self._targets: list = []  # the refused objects and their guards, to spot them as values
        self._watched: dict = {}  # the refused functions' own code objects -> their names
        for name in self.names:
            target = _resolve(name)
            inner = inspect.unwrap(target) if callable(target) else target
            if inner is not target and isinstance(inner, types.FunctionType):
                # a decorated function: its own code is a closure's and cannot be swapped, but
                # the function it wraps (`__wrapped__`) can, so every path to it is guarded
                self._guard_code(name, inner)
                self._targets.append(inner)
            self._targets.append(target)
            if isinstance(target, type):
                self._watch(name, target.__dict__.get("__init__"))
                self._undo.append((target, "__init__", target.__dict__.get("__init__")))
                type.__setattr__(target, "__init__", self._guard(name, target.__init__))
                continue
            self._guard_code(name, target)
            guard = self._guard(name, target)
            self._guards[id(guard)] = (guard, target)
            self._targets.append(guard)
            owner = _resolve(name.rsplit(".", 1)[0]) if name.count(".") > 1 else None
            if isinstance(owner, type) and isinstance(
                owner.__dict__.get(name.rsplit(".")[-1]), types.FunctionType
            ):
                # a method (`al.topic.Class.forward`): its code may not be swappable (`super()`
                # makes it a closure), so the class's own attribute is the guard while the block runs
                attr = name.rsplit(".")[-1]
                self._undo.append((owner, attr, owner.__dict__[attr]))
                type.__setattr__(owner, attr, guard)
            for module in _accumlab_modules():
                for attr, value in list(vars(module).items()):
                    if value is target:
                        setattr(module, attr, guard)
        # last: a failure above leaves no profile function behind (__exit__ does not run)
        self._code_watch = CodeWatch(self._watched, self._judge).start()
        return self

    def _guard_code(self, name: str, target) -> None:
        """Swap `target.__code__` for a guard that every binding of the function runs: it calls a
        handler (named in the function's own globals while the block runs), which lets accumlab's
        own callers through to a twin holding the original code and refuses any other caller."""
        if not isinstance(target, types.FunctionType):
            return  # a builtin: refused through its module bindings only
        self._watch(name, target)
        original = target.__code__
        twin = types.FunctionType(
            original, target.__globals__, target.__name__, target.__defaults__, target.__closure__
        )
        twin.__kwdefaults__ = target.__kwdefaults__
        handler_name = f"__accumlab_refused_{next(_GUARDS)}__"

        def handler(args, kwargs):
            if self._own_call(sys._getframe(2)):  # 1: the guarded function
                return twin(*args, **kwargs)
            self.called.append(name)
            raise Hint(self.hint())

        # a closure's code must keep its count of free variables (`super()` makes `__class__`
        # one): the guard is made inside a factory taking them, and names them all
        free = original.co_freevars
        touch = f"    ({', '.join(free)},)\n" if free else ""
        source = (
            f"def __factory__({', '.join(free)}):\n"
            f"  def {original.co_name}(*args, **kwargs):\n{touch}"
            f"    return {handler_name}(args, kwargs)\n"
            f"  return {original.co_name}.__code__\n"
        )
        scope: dict = {}
        exec(compile(source, original.co_filename, "exec"), scope)
        target.__globals__[handler_name] = handler
        target.__code__ = scope["__factory__"](*[None] * len(free))
        self._codes.append((target, original, handler_name))

    def _quiet_refusals(self, args) -> None:
        if not (isinstance(args.exc_value, Hint) and self.called):
            self._excepthook(args)

    def __exit__(self, kind, err, tb) -> None:
        still_on = self._code_watch.stop()  # first, so that nothing below runs watched
        threading.excepthook = self._excepthook
        for target, original, handler_name in reversed(self._codes):
            target.__code__ = original
            target.__globals__.pop(handler_name, None)
        self._codes.clear()
        for owner, attr, value in reversed(self._undo):
            if value is None:
                delattr(owner, attr)
            else:
                type.__setattr__(owner, attr, value)
        # every binding of a guard, including those a lazy name cached during the block
        for module in _accumlab_modules():
            for attr, value in list(vars(module).items()):
                if id(value) in self._guards and self._guards[id(value)][0] is value:
                    setattr(module, attr, self._guards[id(value)][1])
        if self.called and (kind is None or issubclass(kind, Exception)):
            raise Hint(self.hint()) from None
        if not still_on and kind is None:
            raise Hint(
                "your answer switched off sys.setprofile, which al.check uses to see what your "
                "answer runs"
            )
