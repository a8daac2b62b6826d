"""Checkable exercises: `al.check("02.1", answer)` says whether an answer is right and, if not,
gives a hint (never the solution). Each lesson's checkers live in `exercises/lessonNN.py`; the
solutions live apart, in the repository's `solutions/` folder, and the tests run every checker
against its solution so every exercise stays solvable (lesson 00 explains how to use them).
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass

from ._answers import Hint
from ._kept_state import KeptState
from ._limit import AnswerTimeout, call_within, is_stub

_REGISTRY: dict[str, Exercise] = {}
_ID = re.compile(r"^(\d\d)\.(\d+)$")
# Seconds an answer (with its checker) may run. The slowest checker takes about 2 s on a busy
# 2-core CPU, its first imports included; 30 s leaves room for a slow laptop or Binder while an
# answer that loops forever still gets its hint within half a minute.
TIME_LIMIT = 30.0


@dataclass(frozen=True)
class Exercise:
    id: str
    stars: int  # 1 to 3: ★ warm-up, ★★ apply, ★★★ stretch
    title: str
    checker: Callable[[object], str | None]  # returns None when right, else a hint
    time_limit: float = 0.0  # seconds for this checker, when it needs more than TIME_LIMIT


@dataclass(frozen=True)
class CheckResult:
    id: str
    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return f"{'✅' if self.ok else '❌'} Exercise {self.id}: {self.message}"

    def _repr_markdown_(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        # IPython's plain-text display (a console, a text-only front end): the same line
        printer.text(str(self))


def exercise(id: str, stars: int, title: str, *, time_limit: float = 0.0):
    """Decorator registering `checker(answer) -> None | hint` as exercise `id` ("NN.m");
    `time_limit`, for a checker whose own work needs more than TIME_LIMIT on a busy CPU."""
    if not _ID.match(id) or stars not in (1, 2, 3):
        raise ValueError(
            f"exercise id must look like '02.1' and stars be 1-3, got {id!r}, {stars!r}"
        )

    def register(checker):
        _REGISTRY[id] = Exercise(id, stars, title, checker, time_limit)
        return checker

    return register


def _load(lesson: str) -> None:
    try:
        importlib.import_module(f"{__name__}.lesson{lesson}")
    except ModuleNotFoundError as err:
        if err.name != f"{__name__}.lesson{lesson}":
            raise


def get(id: str) -> Exercise:
    m = _ID.match(id) if isinstance(id, str) else None
    if not m:
        raise ValueError(f"exercise id must look like '02.1', got {id!r}")
    _load(m.group(1))
    if id not in _REGISTRY:
        known = ", ".join(sorted(e for e in _REGISTRY if e.startswith(m.group(1)))) or "none"
        raise ValueError(f"no exercise {id!r}; lesson {m.group(1)} has: {known}")
    return _REGISTRY[id]


def all_exercises(lessons: list[str] | None = None) -> list[Exercise]:
    """Every registered exercise (loading each lesson's checkers first)."""
    import pkgutil

    from . import __path__ as here

    for info in pkgutil.iter_modules(here):
        if info.name.startswith("lesson"):
            _load(info.name.removeprefix("lesson"))
    return [e for i, e in sorted(_REGISTRY.items()) if lessons is None or i[:2] in lessons]


def _stopped(stop: AnswerTimeout) -> str:
    """The hint for an answer that was stopped: by al.check's own limit, or by a shorter limit of
    the code that called al.check."""
    if stop.ours:
        return (
            f"your answer was still running after {stop.limit:g} s and was stopped — a loop that "
            "never ends? (al.check(..., time_limit=...) allows longer)"
        )
    return (
        f"your answer was stopped after {stop.elapsed:.1f} s by a time limit of the code that called "
        f"al.check, which ended before al.check's own {stop.limit:g} s (time_limit= cannot extend it)"
    )


def _said(err: BaseException) -> str:
    """The error's message, or a placeholder when its own __str__ raises."""
    try:
        return str(err)
    except Exception:
        return "(its message could not be printed)"


def check(id: str, answer, *, time_limit: float | None = None) -> CheckResult:
    """Check `answer` for exercise `id`. An answer that raises gets the error as its hint; one
    still running after `time_limit` seconds (default TIME_LIMIT) is stopped and gets a hint."""
    from .._validate import positive_float

    ex = get(id)
    default = max(TIME_LIMIT, ex.time_limit)
    seconds = positive_float("time_limit", default if time_limit is None else time_limit)
    stars = "★" * ex.stars
    if is_stub(answer):
        return CheckResult(id, False, f"{stars} {ex.title} — not answered yet.")
    if inspect.iscoroutinefunction(answer):  # its result would be a coroutine nobody awaits
        hint = "al.check calls your function without awaiting it: write it with def, not async def"
        return CheckResult(id, False, f"{stars} {ex.title} — not yet. Hint: {hint}")
    try:
        with KeptState() as kept:
            hint = call_within(seconds, ex.checker, answer)
    except AnswerTimeout as stop:
        hint = _stopped(stop)
    except Hint as given:  # a checker (or _answers / _observe) raised its hint
        hint = str(given)
    except SystemExit:  # sys.exit() in the answer would end the kernel's cell with a traceback
        hint = "your answer called sys.exit() (or exit()): return a value instead"
    except KeyboardInterrupt:  # the learner's own interrupt stops the check
        raise
    except BaseException as err:  # the learner's code raised: say so instead of a deep traceback
        hint = f"your answer raised {type(err).__name__}: {_said(err)}"
        if "support saved tensor hooks" in hint:  # torch.func under the checker's watch
            hint = (
                "torch.func's transforms (vjp, grad, jacrev) refuse to run under saved-tensor "
                "hooks, and this check counts the bytes saved for backward with them: compute the "
                "same gradient with .backward() (or torch.autograd.grad, where the exercise allows it)"
            )
    if kept.replaced_before:  # the check ran with torch's own, but say why the kernel is odd
        hint = (
            f"{kept.replaced_before[0]} was replaced in this kernel before al.check (al.check "
            "compares with it, and used torch's own): put it back, or restart the kernel"
        )
    elif kept.replaced:  # whatever the checker concluded, it compared with the answer's function
        hint = (
            f"your answer replaced {kept.replaced[0]}, which al.check compares with (put back "
            "now): check again without replacing it"
        )
    elif kept.grad_off and hint is not None:
        hint += " (your answer also left autograd switched off: al.check switched it back on)"
    if hint is None:
        return CheckResult(id, True, f"{stars} {ex.title} — correct!")
    return CheckResult(id, False, f"{stars} {ex.title} — not yet. Hint: {hint}")
