"""Argument checks shared by every module: one clear ValueError naming the parameter and value.

Every function a lesson, an exercise or a learner calls checks its arguments here, at the
boundary, so a mistake is said in accumlab's words instead of surfacing from deep inside torch.
Nothing here imports torch at module level, so `import accumlab` and `python -m accumlab.dist
--help` stay cheap.
"""

from __future__ import annotations

import difflib
import math
import operator
from collections.abc import Callable, Iterable, Mapping

from ._machine import human_bytes, memory_limit

# --- numbers -------------------------------------------------------------------------------------


def _is_bool(value) -> bool:
    """True/False, also as numpy's bool_ or a bool 0-d tensor: as a size or a rate, a mistake."""
    return isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool")


def _is_int(value) -> bool:
    """The one integer rule: an int, a numpy integer, an integer 0-d array or tensor. Not a bool,
    not a float, and not a one-element array or tensor of shape (1,): `operator.index` takes those
    too, and `[3]` where 3 was meant is a mistake to say, not a count to read."""
    if _is_bool(value) or getattr(value, "shape", ()) != ():
        return False
    try:
        operator.index(value)  # int, numpy integers, integer 0-d tensors; not floats or strings
    except TypeError:
        return False
    return True


def positive_int(
    name: str, value, *, minimum: int = 1, maximum: int | None = None, why: str = ""
) -> int:
    """An integer in [minimum, maximum]; `why` says where the maximum comes from."""
    if not _is_int(value) or operator.index(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = operator.index(value)
    if maximum is not None and value > maximum:
        raise ValueError(
            f"{name} must be at most {maximum}, got {value}" + (f": {why}" if why else "")
        )
    return value


def positive_float(
    name: str, value, *, allow_zero: bool = False, maximum: float | None = None, why: str = ""
) -> float:
    """A finite number > 0 (>= 0 with allow_zero). NaN and inf are refused: a NaN learning rate
    or timeout never raises by itself, it silently makes every later number NaN or infinite."""
    bound = ">= 0" if allow_zero else "> 0"
    number = _real(value)
    if (
        number is None
        or not math.isfinite(number)
        or not (number >= 0 if allow_zero else number > 0)
    ):
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    if maximum is not None and number > maximum:
        raise ValueError(
            f"{name} must be at most {maximum:g}, got {value!r}" + (f": {why}" if why else "")
        )
    return number


def finite_float(name: str, value, *, minimum: float | None = None) -> float:
    """Any finite number (at least `minimum` when given)."""
    number = _real(value)
    if number is None or not math.isfinite(number) or (minimum is not None and number < minimum):
        bound = f" >= {minimum:g}" if minimum is not None else ""
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")
    return number


def fraction(name: str, value) -> float:
    """A number in [0, 1): a probability such as a dropout rate."""
    number = _real(value)
    if number is None or not 0.0 <= number < 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return number


def _real(value) -> float | None:
    """float(value) for a real number (also a 0-d tensor or numpy scalar); None otherwise."""
    import numbers

    if _is_bool(value) or not (
        isinstance(value, numbers.Real) or getattr(value, "shape", None) == ()
    ):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):  # a complex or string 0-d array
        return None


def flag(name: str, value) -> bool:
    """True or False; a string such as 'False' is truthy and would silently mean the opposite."""
    if not isinstance(value, bool) and type(value).__name__ != "bool_":
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


# Seeds: numpy's generator takes 0 <= seed < 2**32, torch's up to 2**64 - 1; al.setup seeds both
SEED_LIMIT = 2**32


def seed(name: str, value) -> int:
    if not _is_int(value) or not 0 <= operator.index(value) < SEED_LIMIT:
        raise ValueError(
            f"{name} must be an integer in [0, 2**32) (numpy's seed range; al.setup seeds numpy "
            f"and torch alike), got {value!r}"
        )
    return operator.index(value)


# --- names and collections -----------------------------------------------------------------------


def one_of(name: str, value, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    try:
        known = value in choices
    except TypeError:  # an unhashable or incomparable value
        known = False
    if not known or not isinstance(value, str):
        raise ValueError(
            f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}"
            + _did_you_mean(value, choices)
        )
    return value


def _did_you_mean(value, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        return ""
    by_case = [c for c in choices if c.lower() == value.lower().replace("-", "_")]
    close = by_case or difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def sequence(name: str, value, *, allow_empty: bool = False) -> list:
    """The items of a list, tuple, array or other ordered collection. A string is refused:
    iterating it character by character would turn 'abc' into three items; a set or a dict has
    no order to rely on."""
    from collections.abc import Set

    if isinstance(value, (str, bytes, Mapping, Set)) or not isinstance(value, Iterable):
        raise ValueError(
            f"{name} must be a list or tuple, got {type(value).__name__} {value!r:.60}"
        )
    items = list(value)
    if not allow_empty and not items:
        raise ValueError(f"{name} must not be empty")
    return items


def mapping(name: str, value, *, keys: type = str) -> dict:
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a dict, got {type(value).__name__} {value!r:.60}")
    for key in value:
        if not isinstance(key, keys):
            raise ValueError(f"{name} keys must be {keys.__name__}, got {key!r}")
    return dict(value)


def function(name: str, value) -> Callable:
    if not callable(value):
        raise ValueError(
            f"{name} must be callable (a function), got {type(value).__name__} {value!r:.60}"
        )
    return value


def instance(name: str, value, kind: type | tuple[type, ...], description: str):
    if not isinstance(value, kind):
        raise ValueError(f"{name} must be {description}, got {type(value).__name__} {value!r:.60}")
    return value


def file_path(name: str, value, *, exists: bool = False):
    """A path (str or os.PathLike) to a file: one that `exists`, or one that can be written (its
    folder exists). Said before any work, not after it (torch.save would fail at the end)."""
    import os
    from pathlib import Path

    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise ValueError(f"{name} must be a file path (a str or a Path), got {value!r:.60}")
    path = Path(value)
    if exists and not path.is_file():
        raise ValueError(f"{name}={str(path)!r}: no such file")
    if not exists and not path.parent.is_dir():
        raise ValueError(f"{name}={str(path)!r}: the folder {str(path.parent)!r} does not exist")
    if not exists and path.is_dir():
        raise ValueError(f"{name}={str(path)!r} is a folder; give a file name")
    return path


# --- memory: the one limit tied to this machine (see _machine.memory_limit) ----------------------


def memory_budget() -> int:
    """The most one request (a data set, a model's parameters, recorded copies) may take: half of
    `memory_limit()`. The other half is for everything that goes with it: the engine's copy of
    the model, gradients, optimizer state, Python and torch themselves."""
    return memory_limit() // 2


def fits_in_memory(what: str, nbytes: int) -> None:
    """Refuse a request whose size alone is past `memory_budget()`: it would swap or be killed by
    the out-of-memory killer (freezing a notebook kernel) instead of failing with a message."""
    budget = memory_budget()
    if nbytes > budget:
        raise ValueError(
            f"{what} would need {human_bytes(nbytes)}; accumlab refuses any single request above "
            f"{human_bytes(budget)}, half of the {human_bytes(memory_limit())} this process may use "
            "(more would swap or be killed by the out-of-memory killer instead of failing)"
        )


# Work done one Python step at a time (layers built, micro-steps run): the lessons stay in the
# hundreds; a micro-step of a lesson model takes about a millisecond on a 2-core CPU, so 10**6
# of them is a quarter of an hour of waiting. A larger number is a typo, said before any work.
MAX_STEPS = 1_000_000


def within_max_steps(count: str, steps: int) -> None:
    """Refuse a call whose loops would run more than MAX_STEPS steps, before the first one runs.
    `count` says how the number was made from the arguments ("draws × (k + 1) micro-steps")."""
    if steps > MAX_STEPS:
        raise ValueError(
            f"{count} = {steps:,}; accumlab runs at most {MAX_STEPS:,} steps in one call (a "
            "million passes of even a lesson model take tens of seconds or more on a CPU: more "
            "is a typo, not a lesson)"
        )


# lists of numbers and the dicts accumlab returns: checked in _validate_results, reached from here
from ._validate_results import (  # noqa: E402, F401 - re-exported for the callers
    check_schema,
    finite_floats,
    nonempty,
    positive_ints,
    result,
    same_length,
)

# torch objects (dtypes, devices, models, data): checked in _validate_torch, reached from here
from ._validate_torch import (  # noqa: E402, F401 - re-exported for the callers
    FLOAT_DTYPES,
    data,
    device,
    finite_tensors,
    first_non_finite,
    float_dtype,
    model,
    optimizer,
    tensor,
    tensor_dict,
)

# --- fitted models --------------------------------------------------------------------------------


def fitted_in_domain(formula: str, fitted: Mapping[str, float], positive: Iterable[str], why: str):
    """A least-squares fit whose parameters named in `positive` came out <= 0 (or not finite) is
    outside its model's domain: say so, with the fitted values and `why` the data gave them,
    instead of handing on a curve with negative costs."""
    bad = [n for n in positive if not (math.isfinite(fitted[n]) and fitted[n] > 0)]
    if bad:
        values = ", ".join(f"{n} = {fitted[n]:.4g}" for n in fitted)
        raise ValueError(
            f"{formula} must have {' and '.join(n + ' > 0' for n in bad)}; the fit gives {values}: "
            f"{why}"
        )
    return fitted
