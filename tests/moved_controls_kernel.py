"""Runs INSIDE a lesson's kernel (loaded by tests/moved_controls_run.py): moves every control of
the explorers a cell has just displayed, as a learner would, and reports what it did.

Nothing here runs at import and nothing is imported at module level: the loader imports this
module before the lesson's own imports may have run, and must not change what they find. Every
move goes through `control.value = ...`, the path a learner's click takes (the widget's observers,
then `Explorer._changed`). Random choices use a private `random.Random` seeded from the variant,
the cell and the control, never the kernel's global generators (the lesson's next cells may
depend on them).
"""

from __future__ import annotations

import json

VARIANTS = ("high", "low", "random")
SLIDER_ATTRS = ("min", "max", "step")


def move_displayed(model_ids: list[str], variant: str, cell: int, sweep: bool) -> str:
    """Move every control of every explorer shown inside the widgets `model_ids` (displayed by
    cell `cell`); `sweep` first walks each control alone over its values (min, a middle step,
    max; every option; both states), then every control goes to the `variant`'s value. Returns
    JSON: one record per explorer with its moves, its final values and any error raised."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    records = [_move(explorer, variant, cell, sweep) for explorer in _explorers_under(model_ids)]
    return json.dumps(records)


def _explorers_under(model_ids: list[str]) -> list:
    """The Explorers whose controls sit inside the displayed widgets, in display order.

    An Explorer is found through its controls: each control's "value" observers include the
    bound method `Explorer._changed` (`control.observe(self._changed, ...)`), which holds the
    explorer. (`gc.get_referrers` would miss it: Explorer's constructor `gc.freeze()`s it.)"""
    from ipywidgets import widgets as wmod

    from accumlab.explorer import Explorer

    registry = getattr(wmod.widget, "_instances", None)
    if registry is None:  # ipywidgets 7
        registry = wmod.Widget.widgets
    found: dict[int, object] = {}
    for model_id in model_ids:
        stack = [registry[model_id]] if model_id in registry else []
        while stack:
            w = stack.pop(0)
            stack.extend(getattr(w, "children", ()) or ())
            notifiers = getattr(w, "_trait_notifiers", {}).get("value", {}).get("change", [])
            for handler in notifiers:
                owner = getattr(handler, "__self__", None)
                if isinstance(owner, Explorer):
                    found.setdefault(id(owner), owner)
    return list(found.values())


def _names(explorer) -> list[str]:
    """The lesson's variables bound to `explorer` (how the owner recognises it)."""
    from IPython import get_ipython

    shell = get_ipython()
    space = shell.user_ns if shell is not None else {}
    return sorted(k for k, v in list(space.items()) if v is explorer and not k.startswith("_"))


def _grid(control) -> list:
    """Every value a learner can give a slider: min, min + step, ..., max (a step that does not
    divide the range stops below max, as the slider itself does)."""
    lo, hi = control.min, control.max
    step = control.step or 1
    count = int(round((hi - lo) / step + 1e-9)) + 1
    if isinstance(control.value, int) and not isinstance(control.value, bool):
        return [lo + i * step for i in range(count)]
    return [round(lo + i * step, 12) for i in range(count)]


def _choices(control) -> list:
    """The values a control can take, in order; None for a control this module cannot move."""
    if isinstance(control.value, bool):
        return [False, True]
    if hasattr(control, "_options_values"):  # Dropdown, ToggleButtons, SelectionSlider, ...
        return list(control._options_values)
    if all(hasattr(control, a) for a in SLIDER_ATTRS) and not isinstance(control.value, tuple):
        if type(control).__name__ == "FloatLogSlider":
            return [control.base**e for e in _grid(control)]
        return _grid(control)
    return None


def _sweep_values(control, start) -> list:
    """min, a middle step and max of a slider; every option; the other state of a switch."""
    values = _choices(control)
    if values is None or isinstance(start, bool) or hasattr(control, "_options_values"):
        return [v for v in (values or []) if v != start]
    picked = [values[0], values[len(values) // 2], values[-1]]
    return [v for v in dict.fromkeys(picked) if v != start]


def _target(control, start, variant: str, draw: float):
    """The variant's value for `control`, other than `start` whenever another exists: "high" the
    last choice (a slider's max), "low" the first (a slider's min), "random" a uniformly drawn
    other choice; a switch is flipped in every variant."""
    values = _choices(control)
    others = [v for v in values if v != start]
    if not others:
        return start
    if variant == "high":
        return others[-1]
    if variant == "low":
        return others[0]
    return others[min(int(draw * len(others)), len(others) - 1)]


def _move(explorer, variant: str, cell: int, sweep: bool) -> dict:
    import random

    start = dict(explorer.values)
    record = {
        "cell": cell,
        "names": _names(explorer),
        "compute": f"{explorer.compute.__module__}.{explorer.compute.__qualname__}",
        "start": {k: repr(v) for k, v in start.items()},
        "moves": [],
        "errors": [],
        "skipped": [],
    }
    movable = {}
    for name, control in explorer.controls.items():
        if getattr(control, "disabled", False):
            record["skipped"].append(f"{name}: disabled")
        elif _choices(control) is None:
            # not silently untested: the test fails on it and says which control it could not move
            record["errors"].append(
                {"move": name, "error": f"cannot move a {type(control).__name__} control"}
            )
        else:
            movable[name] = control

    def move(name, value, phase):
        control = explorer.controls[name]
        before, previous = control.value, explorer.error
        error = None
        try:
            control.value = value
        except Exception as err:  # Explorer._changed keeps it in .error and re-raises it
            error = err
        if error is None and explorer.error is not None and explorer.error is not previous:
            error = explorer.error
        entry = {"phase": phase, "control": name, "from": repr(before), "to": repr(value)}
        if control.value != value:
            entry["got"] = repr(control.value)  # the widget clamped the move: allowed
        record["moves"].append(entry)
        if error is not None:
            record["errors"].append(
                {
                    "move": f"{name} = {value!r} ({phase}; values then {explorer.values!r})",
                    "error": f"{type(error).__name__}: {error}",
                }
            )

    if sweep:  # each control alone over its range, then back: surfaces errors in callbacks
        for name, control in movable.items():
            for value in _sweep_values(control, start[name]):
                move(name, value, "sweep")
            if control.value != start[name]:
                move(name, start[name], "sweep")
    draws = {name: random.Random(f"{variant}:{cell}:{name}").random() for name in movable}
    # twice: a control's range can follow another's value (k's maximum follows the micro-batch
    # size), so the second pass reaches the extreme the first pass opened
    for _ in range(2):
        for name, control in movable.items():
            value = _target(control, start[name], variant, draws[name])
            if value != control.value:
                move(name, value, variant)
    record["final"] = {k: repr(v) for k, v in explorer.values.items()}
    return record
