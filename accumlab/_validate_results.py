"""Argument checks for lists of numbers and for the dicts accumlab's functions return, said in
accumlab's words. Part of `_validate` (which re-exports these names).

Plots and reports read the dicts a lesson's compute function returned; handed a partial or
hand-built one they would fail deep inside with a KeyError or an IndexError. `result` compares
the dict with a schema first and names what is missing.
"""

from __future__ import annotations


class nonempty(list):  # noqa: N801 - reads as a schema word, like list and dict
    """Schema: a list with at least one element, each matching `nonempty([sub])`'s sub."""


def check_schema(value, schema, where: str = "record") -> list[str]:
    """Every way `value` departs from `schema`: a type (float accepts int; bool is not an int), a
    tuple of alternatives, a dict of required keys, `{str: sub}` (a non-empty dict whose every
    value matches sub), or a one-item list (every element matches; `nonempty([...])`: and at
    least one)."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{where}: expected a dict, got {type(value).__name__} {value!r:.40}"]
        if set(schema) == {str}:  # any keys: the labels of what is drawn
            if not value:
                return [f"{where}: expected at least one entry, got an empty dict"]
            sub = schema[str]
            return [p for k, v in value.items() for p in check_schema(v, sub, f"{where}[{k!r}]")]
        problems = [f"{where}: missing key {k!r}" for k in schema if k not in value]
        for k, sub in schema.items():
            if k in value:
                problems += check_schema(value[k], sub, f"{where}.{k}")
        return problems
    if isinstance(schema, list):
        if not isinstance(value, (list, tuple)):
            return [f"{where}: expected a list, got {type(value).__name__} {value!r:.40}"]
        if isinstance(schema, nonempty) and not value:
            return [f"{where}: expected at least one element, got an empty list"]
        return [p for i, v in enumerate(value) for p in check_schema(v, schema[0], f"{where}[{i}]")]
    options = schema if isinstance(schema, tuple) else (schema,)
    for t in options:
        if isinstance(t, (dict, list)):
            if not check_schema(value, t, where):
                return []
        elif t is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return []
        elif t is int and isinstance(value, bool):
            continue
        elif isinstance(value, t):
            return []
    names = ", ".join(getattr(t, "__name__", type(t).__name__) for t in options)
    return [f"{where}: expected {names}, got {type(value).__name__} {value!r:.60}"]


def result(name: str, value, schema, what: str):
    """`value` when it has the shape `schema` describes (see `check_schema`); else a ValueError
    naming the parameter, `what` it must be (the function that makes one), and what is wrong."""
    problems = check_schema(value, schema, name)
    if problems:
        more = f" (and {len(problems) - 2} more)" if len(problems) > 2 else ""
        raise ValueError(f"{name} must be {what}: {'; '.join(problems[:2])}{more}")
    return value


def positive_ints(
    name: str, value, *, minimum: int = 1, maximum: int | None = None, why: str = ""
) -> list[int]:
    """A non-empty list of integers in [minimum, maximum], each named `name[i]` when wrong."""
    from ._validate import positive_int, sequence

    return [
        positive_int(f"{name}[{i}]", v, minimum=minimum, maximum=maximum, why=why)
        for i, v in enumerate(sequence(name, value))
    ]


def finite_floats(
    name: str, value, *, minimum: float | None = None, allow_empty: bool = False
) -> list[float]:
    """A list of finite numbers (each at least `minimum`): NaN or inf in a list of norms, gaps or
    times never raises by itself, it silently spoils every number computed from it."""
    from ._validate import finite_float, sequence

    return [
        finite_float(f"{name}[{i}]", v, minimum=minimum)
        for i, v in enumerate(sequence(name, value, allow_empty=allow_empty))
    ]


def same_length(**named) -> None:
    """Lists that pair up element by element must be equally long."""
    lengths = {k: len(v) for k, v in named.items()}
    if len(set(lengths.values())) > 1:
        said = " and ".join(f"{n} in {k}" for k, n in lengths.items())
        raise ValueError(
            f"{' and '.join(lengths)} must be of equal length (they pair up element by element), "
            f"got {said}"
        )
