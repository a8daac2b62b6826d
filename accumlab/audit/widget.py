"""Lesson 08's gallery explorer: pick a loop from the catalogue, see its audit."""

from __future__ import annotations

import functools

from ..explorer import Explorer


def audit_explorer(names: list[str] | None = None) -> Explorer:
    """A dropdown of catalogue loops → the loop's audit report (`.data`) and its timeline plot.

    Only catalogue names are offered, so no invalid choice is reachable. Lesson 08.
    """
    import ipywidgets as W

    from .catalogue import CATALOGUE
    from .plot import plot_audit, update_audit

    names = list(names) if names is not None else list(CATALOGUE)
    unknown = [n for n in names if n not in CATALOGUE]
    if unknown or not names:
        raise ValueError(f"names must be catalogue loops ({', '.join(CATALOGUE)}), got {names!r}")
    choice = W.Dropdown(options=names, value=names[0], description="loop")

    @functools.cache  # a catalogue loop's audit never changes: run each once
    def compute(loop: str):
        return CATALOGUE[loop].audit()

    return Explorer({"loop": choice}, compute, plot_audit, update_audit)
