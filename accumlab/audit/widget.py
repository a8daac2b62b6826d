"""Lesson 08's gallery explorer: pick a loop from the catalogue, see its audit."""

from __future__ import annotations

import functools

from ..explorer import Explorer


def audit_explorer(names: list[str] | None = None) -> Explorer:
    """A dropdown of catalogue loops → the loop's audit report (`.data`) and its timeline plot.

    `names`: a list of catalogue names (default: every loop but exercise 08.1's, whose audit is
    the exercise's answer). Only those are offered, so no invalid choice is reachable. Lesson 08.
    """
    import ipywidgets as W

    from .._validate import one_of, sequence
    from .catalogue import CATALOGUE, EXERCISE_LOOPS
    from .plot import plot_audit, update_audit

    if names is None:
        names = [n for n in CATALOGUE if n not in EXERCISE_LOOPS]
    names = sequence("names", names)  # a str would split into its characters
    for name in names:
        one_of("names", name, CATALOGUE)
    if len(set(names)) < len(names):
        raise ValueError(f"names must not repeat a loop, got {names!r}")
    choice = W.Dropdown(options=names, value=names[0], description="loop")

    @functools.cache  # a catalogue loop's audit never changes: run each once
    def compute(loop: str):
        return CATALOGUE[loop].audit()

    return Explorer({"loop": choice}, compute, plot_audit, update_audit)
