"""Lesson 06's pure plots: data in, matplotlib Figure out (no widget code, no pyplot state)."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from .._validate import finite_floats, same_length, sequence
from . import shapes


def plot_scales(traces: dict, *, title: str = "") -> Figure:
    """GradScaler's scale at every backward, per loop order (log scale); window ends dotted,
    skipped windows shaded. `traces` maps a label to an `al.precision.AmpTrace`."""
    shapes.traces("traces", traces)
    fig = Figure(figsize=(7, 3.4), layout="constrained")
    ax = fig.add_subplot()
    first = next(iter(traces.values()))
    k = len(first.micro_scales) // max(len(first.window_scales), 1)
    for w, skipped in enumerate(first.skipped):
        if skipped:
            ax.axvspan(w * k - 0.5, (w + 1) * k - 0.5, color="tab:red", alpha=0.12)
        ax.axvline((w + 1) * k - 0.5, color="grey", linestyle=":", linewidth=1)
    for label, trace in traces.items():
        ax.step(
            range(len(trace.micro_scales)), trace.micro_scales, where="mid", marker="o", label=label
        )
    ax.set_yscale("log", base=2)
    ax.set_xlabel("micro-step (dotted: window ends; shaded: step skipped in the first loop)")
    ax.set_ylabel("loss scale used by backward")
    ax.set_title(title or "GradScaler's scale inside and across windows", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def plot_precision(sweep: dict, *, mark_k: int | None = None, title: str = "") -> Figure:
    """Relative error of accumulating k contributions in each precision vs float64 (log-log)."""
    shapes.sweep("sweep", sweep)
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.add_subplot()
    for name, errors in sweep["errors"].items():
        ax.plot(sweep["ks"], errors, marker="o", label=name)
    if mark_k is not None:
        ax.axvline(mark_k, color="grey", linestyle="--", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("accumulation steps k")
    ax.set_ylabel("relative L2 error vs float64")
    ax.set_title(title or "Error of the accumulated gradient, by buffer precision", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def plot_schedules(curves: dict, *, title: str = "") -> Figure:
    """Learning rate per optimizer step for each scheduler placement; warm-up ends marked."""
    shapes.curves("curves", curves)
    fig = Figure(figsize=(7, 3.4), layout="constrained")
    ax = fig.add_subplot()
    for placement, lrs in curves["lrs"].items():
        (line,) = ax.plot(
            range(len(lrs)), lrs, marker=".", label=f"scheduler.step() per {placement}"
        )
        end = curves["warmup_end"][placement]
        if end is not None:
            ax.axvline(end, color=line.get_color(), linestyle=":", linewidth=1)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    ax.set_title(
        title
        or f"Warm-up {curves['warmup_steps']} steps + cosine, k = {curves['k']} (dotted: full lr reached)",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    return fig


def plot_skip_conventions(conv: dict, *, title: str = "") -> Figure:
    """The lr each window used under each scheduler convention after skipped steps (shaded), and
    the schedule as written (from `al.precision.skip_conventions`)."""
    shapes.conventions("conv", conv)
    fig = Figure(figsize=(7, 3.4), layout="constrained")
    ax = fig.add_subplot()
    windows = range(conv["windows"])
    first = next(iter(conv["skipped"].values()))
    for w, skipped in enumerate(first):
        if skipped:
            ax.axvspan(w - 0.5, w + 0.5, color="tab:red", alpha=0.12)
    ax.plot(windows, conv["schedule"], "k:", linewidth=1, label="schedule as written")
    for (name, lrs), style in zip(conv["lrs"].items(), ("o-", "s--"), strict=False):
        ax.plot(windows, lrs, style, markersize=5, label=f"scheduler on a skipped step: {name}")
    ax.set_xlabel("window (= optimizer step; shaded: GradScaler skipped it)")
    ax.set_ylabel("learning rate used")
    ax.set_title(title or "What the schedule does after a skipped step", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def plot_update_norms(
    labels: list[str], norms: list[float], *, limit: float | None = None, title: str = ""
) -> Figure:
    """Bars of update norms; `limit` draws the lr × max_norm line a clipped SGD step cannot exceed."""
    labels, norms = sequence("labels", labels), finite_floats("norms", norms)
    same_length(labels=labels, norms=norms)
    fig = Figure(figsize=(6, 3.2), layout="constrained")
    ax = fig.add_subplot()
    ax.bar(labels, norms, color=["tab:blue", "tab:green", "tab:orange", "tab:red"][: len(labels)])
    if limit is not None:
        ax.axhline(limit, color="black", linestyle="--", linewidth=1, label="lr × max_norm")
        ax.legend(fontsize=8)
    ax.set_ylabel("‖update‖")
    ax.set_title(title, fontsize=10)
    return fig


def plot_explorer(data: dict) -> Figure:
    """Lesson 06's explorer: update norms per step, learning rates, accumulation error."""
    shapes.explorer("data", data)
    fig = Figure(figsize=(11, 3.4), layout="constrained")
    a, b, c = fig.subplots(1, 3)
    steps = range(len(data["update_norms"]))
    a.plot(steps, data["update_norms"], marker="o", label="this loop")
    a.plot(steps, data["reference_update_norms"], marker=".", linestyle="--", label="full batch")
    if data["max_norm"] is not None:
        a.axhline(
            data["lr_max"] * data["max_norm"],
            color="grey",
            linestyle=":",
            linewidth=1,
            label="peak lr × max_norm",
        )
    a.set_xlabel("optimizer step")
    a.set_ylabel("‖update‖")
    a.set_title("update size", fontsize=10)
    a.legend(fontsize=7)
    b.plot(steps, data["lrs"], marker="o", label="this loop")
    b.plot(steps, data["reference_lrs"], marker=".", linestyle="--", label="per optimizer step")
    b.set_xlabel("optimizer step")
    b.set_ylabel("learning rate")
    b.set_title("schedule", fontsize=10)
    b.legend(fontsize=7)
    errors = data["precision"]["errors"]
    for name, values in errors.items():
        c.plot(data["precision"]["ks"], values, marker=".", label=name)
    c.axvline(data["k"], color="grey", linestyle="--", linewidth=1)
    c.set_xscale("log", base=2)
    c.set_yscale("log")
    c.set_xlabel("k")
    c.set_ylabel("relative error vs float64")
    c.set_title(
        f"accumulation error (k = {data['k']}: {data['accumulation_error']:.1e})", fontsize=10
    )
    c.legend(fontsize=7)
    if not all(math.isfinite(v) for v in data["update_norms"]):
        fig.suptitle("non-finite update", color="tab:red")
    return fig
