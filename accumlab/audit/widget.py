"""Lesson 08's gallery explorer: pick a loop from the catalogue and the run's size (k, micro-batch
size, epochs, max_norm, rtol), see its code, its audit and the timeline."""

from __future__ import annotations

import functools
import html

from ..explorer import Explorer

SETUP = "the setup's"  # a choice that keeps the catalogue setup's own value
CHOICES = {  # control -> the values offered besides SETUP
    "k": (2, 3, 4, 5),
    "micro_batch_size": (2, 3, 4, 5),
    "epochs": (1, 2, 3),
    "max_norm": (0.5, 1.0, 20.0, 100.0),  # only for loops that clip
    "rtol": (1e-9, 1e-5, 1e-3, 2e-2),
}


def _caption(report, source: str) -> str:
    findings = "".join(
        f"<li><b>{f.code}</b> ({f.severity}): {html.escape(f.message)}</li>"
        for f in report.findings
    )
    return (
        f"<details><summary>the loop's code</summary><pre>{html.escape(source)}</pre></details>"
        f"<p>{html.escape(report._header())} ok = {report.ok}</p>"
        f"<ul>{findings or '<li>no finding: the loop matches the reference</li>'}</ul>"
    )


def audit_explorer(names: list[str] | None = None) -> Explorer:
    """Controls for a catalogue loop and the run's size → the loop's audit report (`.data`), its
    code and findings (the caption) and its timeline plot.

    `names`: a list of catalogue names (default: every loop but exercise 08.1's, whose audit the
    exercise asks to predict). Only those are offered, so no invalid choice is reachable; `max_norm`
    applies to loops that clip (the others take no max_norm). Lesson 08.
    """
    import ipywidgets as W

    from .._validate import one_of, sequence
    from .catalogue import CATALOGUE, EXERCISE_LOOPS
    from .plot import plot_audit, update_audit
    from .setups import audit_setup

    if names is None:
        names = [n for n in CATALOGUE if n not in EXERCISE_LOOPS]
    names = sequence("names", names)  # a str would split into its characters
    for name in names:
        one_of("names", name, CATALOGUE)
    if len(set(names)) < len(names):
        raise ValueError(f"names must not repeat a loop, got {names!r}")
    controls = {"loop": W.Dropdown(options=names, value=names[0], description="loop")}
    for control, values in CHOICES.items():
        options = [(SETUP, None)] + [(f"{v:g}", v) for v in values]
        controls[control] = W.Dropdown(options=options, value=None, description=control)

    @functools.cache  # a catalogue loop's audit never changes: run each choice once
    def compute(loop: str, **sizes):
        entry = CATALOGUE[loop]
        setup = audit_setup(entry.setup, **entry.options)
        if sizes["k"] is not None:
            setup["accumulation_steps"] = sizes["k"]
        if sizes["micro_batch_size"] is not None:
            setup["micro_batch_size"] = sizes["micro_batch_size"]
        if sizes["max_norm"] is not None and "max_norm" in entry.options:
            setup["max_norm"] = sizes["max_norm"]
        for option in ("epochs", "rtol"):
            if sizes[option] is not None:
                setup[option] = sizes[option]
        from .auditor import audit

        return audit(entry.fn, **setup)

    def caption(report) -> str:
        return _caption(report, CATALOGUE[controls["loop"].value].source)

    return Explorer(controls, compute, plot_audit, update_audit, caption=caption)
