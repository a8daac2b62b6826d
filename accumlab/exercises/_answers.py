"""Numbers as a person types them: reading an answer, and comparing it with a stated tolerance.

Every checker that asks for a number uses these, so every lesson accepts the same forms: `int`,
`float`, numpy scalars (and 0-d arrays), 0-d torch tensors of any real dtype, `Fraction` and
`Decimal`, read as builtins. Refused, with a hint in words: `bool`, NaN and inf, text (`"0.5"`),
complex numbers, tensors with more than one element.

A checker raises `Hint("...")` (or lets one of these functions raise it) and `al.check` turns it
into the learner's hint, so a checker reads as a list of conditions (`compare(answer, expected,
sig=3, wrong={near_miss: "why"}, otherwise="...")`).

Tolerances are stated in every hint they produce ("to 3 significant digits"). An answer that agrees
with the expected value to all the digits it gives, but gives fewer than the tolerance needs (0.03
for 0.025996 at 3 significant digits), is told "close — give more digits", never a hint that
implies a wrong method.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction


class Hint(Exception):
    """A checker's hint for the learner. Raise it anywhere inside a checker (or in a helper the
    checker calls); `al.check` shows its text as the hint."""


def _kind(answer) -> str:
    if isinstance(answer, str):
        return f"the text {answer!r} (remove the quotes)"
    return f"a {type(answer).__name__}"


def _tensor_value(answer):
    """float or int from a torch tensor or numpy array with one element and no dimensions."""
    shape = tuple(getattr(answer, "shape", (None,)))
    if shape != ():
        raise Hint(
            f"answer with one number, got a {type(answer).__name__} of shape {shape} "
            "(`.item()` gives its number when it holds one)"
        )
    dtype = str(getattr(answer, "dtype", ""))
    if "bool" in dtype:
        raise Hint(f"answer with one number, got a True/False value {answer!r}")
    if "complex" in dtype:
        raise Hint(f"answer with one real number, got a complex value {answer!r}")
    try:
        return answer.item()
    except Exception as err:  # a meta tensor, a string array: no number inside
        raise Hint(f"answer with one number, got {answer!r:.60} ({err})") from None


def _value(answer):
    """The answer as an exact Python number (int, float or Fraction), or Hint."""
    import numbers

    if isinstance(answer, (bool,)) or type(answer).__name__ == "bool_":
        raise Hint(f"answer with one number, got {answer!r} (a True/False value is not a number)")
    if isinstance(answer, int):  # builtins: a subclass's own __eq__ must not judge itself
        value = int.__index__(answer)
    elif isinstance(answer, float):
        value = float.__float__(answer)
    elif isinstance(answer, Fraction):
        value = Fraction(int.__index__(answer.numerator), int.__index__(answer.denominator))
    elif isinstance(answer, Decimal):
        if not answer.is_finite():
            raise Hint(f"answer with one finite number, got {answer}")
        if abs(answer.adjusted()) > _DIGITS:  # Fraction(Decimal("1e10000000")) takes seconds
            raise Hint(f"answer with a number in a sensible range, got {answer:.3e}")
        value = Fraction(answer)
    elif isinstance(answer, numbers.Integral):  # numpy integers
        value = int(answer)
    elif isinstance(answer, numbers.Real):  # numpy floating scalars
        value = float(answer)
    elif isinstance(answer, numbers.Complex):
        raise Hint(f"answer with one real number, got a complex number {answer!r}")
    elif hasattr(answer, "shape") and hasattr(answer, "dtype"):  # tensor, numpy array
        value = _tensor_value(answer)
        if isinstance(value, bool):
            raise Hint(f"answer with one number, got a True/False value {answer!r}")
    else:
        raise Hint(f"answer with one number, got {_kind(answer)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise Hint(
            f"answer with one finite number, got {value} — something in the computation overflowed or divided 0 by 0"
        )
    if isinstance(value, (int, Fraction)) and abs(value) > _LARGEST:
        if isinstance(value, int):  # str() refuses more than 4300 digits: count them from bits
            size = f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
        else:
            size = "a fraction beyond the largest float"
        raise Hint(f"answer with a number in a sensible range, got {size}")
    return value


_LARGEST = 1.7976931348623157e308  # sys.float_info.max: beyond it no float holds the number
_DIGITS = 308  # powers of ten a Decimal may carry before it is beyond every float


def number(answer) -> float:
    """The answer as a float: any real number type (see the module docstring), else `Hint`."""
    return float(_value(answer))


def integer(answer) -> int:
    """The answer as an int. A float that is a whole number counts (78.0 is 78; so do
    `torch.tensor(78.)` and `np.int64(78)`); 78.4 does not. `integer(np.int64(7)) == 7`."""
    value = _value(answer)
    if value != int(value):
        raise Hint(f"answer with a whole number, got {answer!r}")
    return int(value)


def _items(answer, n: int, *, any_order: bool = False) -> list:
    from collections.abc import Iterable, Mapping, Set

    # a set, a range or a generator of steps: their order is no part of the answer
    if any_order and isinstance(answer, Iterable) and not isinstance(answer, (str, bytes, Mapping)):
        answer = list(answer) if not hasattr(answer, "shape") else answer
    if hasattr(answer, "shape") and hasattr(answer, "tolist"):  # a 1-d tensor or array
        if len(tuple(answer.shape)) != 1:
            raise Hint(
                f"answer with {n} numbers, e.g. a tuple, got an array of shape {tuple(answer.shape)}"
            )
        answer = [answer[i] for i in range(answer.shape[0])]
    if isinstance(answer, (str, bytes, Mapping, Set)) or not isinstance(answer, (tuple, list)):
        order, example = "" if any_order else " in order", ", ".join("abcdefgh"[: min(n, 8)])
        raise Hint(f"answer with {n} numbers{order}, e.g. a tuple ({example}), got {_kind(answer)}")
    if len(answer) != n:
        raise Hint(f"answer with {n} numbers, got {len(answer)}: {tuple(answer)!r:.80}")
    return list(answer)


def numbers(answer, n: int) -> tuple[float, ...]:
    """`n` numbers as floats from a tuple, a list, or a 1-d tensor or array; each item may be of any
    accepted number type. `numbers((np.int64(7), 3.0), 2) == (7.0, 3.0)`."""
    items = _items(answer, n)
    out = []
    for i, item in enumerate(items):
        try:
            out.append(number(item))
        except Hint as hint:
            raise Hint(f"item {i + 1} of {n}: {hint}") from None
    return tuple(out)


def integers(answer, n: int, *, any_order: bool = False) -> tuple[int, ...]:
    """`n` whole numbers, as `numbers` reads them. `integers((np.int64(7), 3.0), 2) == (7, 3)`.
    With `any_order`, a set is accepted too and the numbers come back sorted."""
    items = _items(answer, n, any_order=any_order)
    out = []
    for i, item in enumerate(items):
        try:
            out.append(integer(item))
        except Hint as hint:
            raise Hint(f"item {i + 1} of {n}: {hint}") from None
    return tuple(sorted(out)) if any_order else tuple(out)


# --- tolerances -----------------------------------------------------------------------------------


def tolerance(*, sig: int | None = None, rel: float | None = None, abs: float | None = None):
    """Check that exactly one tolerance is given; return (kind, amount)."""
    given = [(k, v) for k, v in (("sig", sig), ("rel", rel), ("abs", abs)) if v is not None]
    if len(given) != 1:
        raise TypeError(f"give exactly one of sig=, rel=, abs=; got {dict(given) or 'none'}")
    kind, amount = given[0]
    if kind == "sig" and (not isinstance(amount, int) or amount < 1):
        raise TypeError(f"sig must be a whole number of digits >= 1, got {amount!r}")
    if kind != "sig" and not (isinstance(amount, (int, float)) and amount >= 0):
        raise TypeError(f"{kind} must be a number >= 0, got {amount!r}")
    return kind, amount


def tolerance_words(*, sig=None, rel=None, abs=None) -> str:
    """How a tolerance reads in a hint: "3 significant digits", "a relative 1e-06", "± 0.001"."""
    kind, amount = tolerance(sig=sig, rel=rel, abs=abs)
    if kind == "sig":
        return f"{amount} significant digit{'s' if amount > 1 else ''}"
    return f"a relative {amount:g}" if kind == "rel" else f"± {amount:g}"


def _allowed(expected: float, kind: str, amount) -> float:
    """The largest |answer - expected| the tolerance accepts."""
    if kind == "abs":
        return float(amount)
    if kind == "rel":
        return float(amount) * math.fabs(expected)
    if expected == 0:
        raise TypeError("sig= cannot judge an expected value of 0: give abs=")
    # half a unit in the last required digit: a value rounded to `sig` digits is off by at most
    # that (a truncated one, 0.922 for 0.92274, is accepted separately: `_truncated`)
    return _sig_unit(expected, amount) / 2 * (1 + 1e-9)  # a rounded float may be a hair over


def _sig_unit(expected: float, sig: int) -> float:
    return 10.0 ** (math.floor(math.log10(math.fabs(expected))) - sig + 1)


def _truncated(value: float, expected: float, kind: str, amount) -> bool:
    """With `sig`: `value` is `expected` cut (toward zero) after `sig` digits: 0.922 for 0.92274,
    but not 1.39 for 1.4 — 1.4 cut to 3 digits is 1.40."""
    if kind != "sig":
        return False
    unit = _sig_unit(expected, amount)
    return math.isclose(
        value, math.trunc(expected / unit) * unit, rel_tol=1e-6, abs_tol=unit * 1e-6
    )


def within(answer, expected: float, *, sig=None, rel=None, abs=None) -> bool:
    """True when the answer (any accepted number type) is within the tolerance of `expected`."""
    kind, amount = tolerance(sig=sig, rel=rel, abs=abs)
    value = number(answer)
    return math.fabs(value - expected) <= _allowed(expected, kind, amount) or _truncated(
        value, expected, kind, amount
    )


def shown_unit(answer) -> float:
    """The place value of the last digit the answer shows: 0.01 for 0.03, 1 for 78, 1e-4 for
    Decimal("0.0260"), 0 for a Fraction (exact). A float is read through its shortest repr (the
    digits a person typed); a float32 value through float32's, so a number typed into
    `torch.tensor(0.03)` counts as 0.03."""
    value = _value(answer)
    if isinstance(answer, Decimal):
        return 10.0 ** answer.as_tuple().exponent
    if isinstance(value, Fraction):
        return 0.0
    if isinstance(value, int):
        return 1.0
    text = repr(float(value))  # np.float64 is a float whose repr (numpy 2) names its type
    dtype = str(getattr(answer, "dtype", ""))
    if "float32" in dtype or "float16" in dtype or "bfloat16" in dtype:
        import numpy as np

        text = str(np.float32(value))  # the digits that identify this float32 value
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2].rstrip("0")) if "." in mantissa else 0
    return 10.0 ** (int(exponent or 0) - decimals)


def _shortened(value: float, expected: float, unit: float) -> bool:
    """True when `value` is `expected` rounded or truncated to the place `unit`: 1 for 1.3, 0.026
    or 0.025 for 0.0259955 — but not 2 for 1.3, which no rounding of 1.3 gives."""
    steps = expected / unit
    return any(
        math.isclose(value, k * unit, rel_tol=1e-6, abs_tol=unit * 1e-6)  # float32-typed digits
        # Python's round() halves to even (12.5 → 12), a person halves up (0.125 → 0.13)
        for k in {round(steps), math.trunc(steps), math.floor(steps + 0.5 + 1e-9)}
    )


def too_coarse(answer, expected: float, *, sig: int) -> bool:
    """Right to every digit shown, but fewer than `sig` digits: `compare`'s "give more digits"."""
    allowed, unit, value = _allowed(expected, "sig", sig), shown_unit(answer), number(answer)
    return unit > allowed and value != 0 and _shortened(value, expected, unit)  # 0 keeps no digit


def items(answer, n: int) -> list:
    """The `n` items of an answer as typed (for `shown_unit`), read as `numbers` reads them."""
    return _items(answer, n)


def compare(
    answer,
    expected: float,
    *,
    sig: int | None = None,
    rel: float | None = None,
    abs: float | None = None,
    wrong: dict | None = None,
    otherwise: str = "that is not the value this exercise asks for",
) -> str | None:
    """None when `answer` is within the tolerance of `expected`, else a hint:

    - not a number: "answer with one number, ...";
    - within the same tolerance of a key of `wrong` (a value a known mistake gives): that value's hint;
    - right to every digit it shows but shown too coarsely: "close — give more digits (needed: 3
      significant digits)";
    - otherwise `otherwise`, with the tolerance stated: "... (checked to 3 significant digits)".

    Give exactly one of `sig` (significant digits of `expected`; a value rounded or truncated to
    that many digits passes), `rel` (|a - e| <= rel·|e|) or `abs` (|a - e| <= abs).
    A `wrong` value that the tolerance would accept as right is a mistake in the checker: TypeError.
    """
    kind, amount = tolerance(sig=sig, rel=rel, abs=abs)
    words = tolerance_words(sig=sig, rel=rel, abs=abs)
    try:
        value = number(answer)
    except Hint as hint:
        return str(hint)
    allowed = _allowed(expected, kind, amount)
    for bad in wrong or {}:
        if math.fabs(bad - expected) <= allowed:
            raise TypeError(
                f"checker mistake: the wrong value {bad!r} is within {words} of the right one "
                f"{expected!r}"
            )
    if math.fabs(value - expected) <= allowed or _truncated(value, expected, kind, amount):
        return None
    # right to the digits it shows (0.2 for 0.18549), but shown too coarsely to judge ("close —
    # give more digits"); a 0 keeps no digit of anything
    unit = shown_unit(answer)
    coarse = unit > allowed and value != 0 and _shortened(value, expected, unit)
    for bad, hint in (wrong or {}).items():
        near = allowed if bad == 0 else _allowed(bad, kind, amount)
        if math.fabs(value - bad) <= near:
            return (
                f"{hint} — or, if you rounded, give more digits (needed: {words})"
                if coarse
                else hint
            )
    if coarse:
        return f"close — give more digits (needed: {words})"
    return f"{otherwise} (checked to {words})"
