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


def plot_real_schedules(result: dict, *, title: str = "") -> Figure:
    """One panel per real scheduler: the lr each optimizer step used, with `scheduler.step()` once
    per optimizer step (solid) and once per micro-batch (dashed; a cross where the scheduler
    raised). From `al.precision.real_schedules`."""
    shapes.real("result", result)
    names = list(result["lrs"])
    fig = Figure(figsize=(3.2 * len(names) + 0.6, 3.2), layout="constrained")
    axes = fig.subplots(1, len(names), sharey=True, squeeze=False)[0]
    styles = {
        "optimizer_step": ("-", "per optimizer step"),
        "micro_step": ("--", "per micro-batch"),
    }
    for ax, name in zip(axes, names, strict=True):
        for placement, lrs in result["lrs"][name].items():
            line, label = styles.get(placement, (":", placement))
            ax.plot(range(len(lrs)), lrs, line, marker=".", markersize=3, label=label)
            if result["errors"][name][placement] is not None:
                ax.plot([len(lrs)], [lrs[-1] if lrs else 0.0], "x", color="tab:red", markersize=9)
                ax.annotate("raised", (len(lrs), lrs[-1] if lrs else 0.0), fontsize=7,
                            xytext=(4, 4), textcoords="offset points", color="tab:red")  # fmt: skip
        ax.set_title(name.replace(" get_", "\nget_").replace("torch ", "torch\n"), fontsize=8)
        ax.set_xlabel("optimizer step")
        ax.set_xlim(-1, result["optimizer_steps"])
    axes[0].set_ylabel("learning rate used")
    axes[0].legend(fontsize=7, title="scheduler.step()", title_fontsize=7, loc="upper right")
    fig.suptitle(
        title
        or f"Real schedulers built for {result['optimizer_steps']} optimizer steps, k = "
        f"{result['k']}",
        fontsize=10,
    )
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


_DECADES = [10.0**e for e in range(-12, 1)]


def plot_explorer(data: dict) -> Figure:
    """Lesson 06's explorer: update norms per step, learning rates, accumulation error. A fixed
    layout with few, plain tick labels; the explorer moves its artists with `update_explorer`."""
    shapes.explorer("data", data)
    from matplotlib.ticker import MaxNLocator, NullLocator

    from ..figures import plain_log_ticks

    fig = Figure(figsize=(11, 3.6))
    fig.subplots_adjust(
        left=0.08, right=0.99, bottom=0.14, top=0.8, wspace=0.32
    )  # room for ‖update‖
    a, b, c = fig.subplots(1, 3)
    for ax, name in ((a, "norms"), (b, "lrs"), (c, "errors")):
        ax.set_gid(name)
    this = a.plot([], [], marker="o", gid="norm")[0]
    reference = a.plot([], [], marker=".", linestyle="--", gid="reference_norm")[0]
    a.axhline(0, color="grey", linestyle=":", linewidth=1, gid="limit")
    a.set_xlabel("optimizer step")
    a.set_ylabel("‖update‖")
    # y given: the title stays put, instead of being re-placed after measuring the tick labels
    a.set_title("update size (dotted: peak lr × max_norm)", fontsize=10, y=1.0)
    b.plot([], [], marker="o", gid="lr")
    b.plot([], [], marker=".", linestyle="--", gid="reference_lr")
    b.set_xlabel("optimizer step")
    b.set_ylabel("learning rate")
    b.set_title("schedule", fontsize=10, y=1.0)
    # one legend for both panels, above them: inside, any corner hides some setting's curve
    fig.legend(
        [this, reference],
        ["this loop", "reference: the full batch, clipped once, scheduler per step"],
        loc="upper left",
        bbox_to_anchor=(0.05, 1.0),
        ncol=2,
        fontsize=8,
        frameon=False,
    )
    ks = data["precision"]["ks"]
    c.plot([], [], marker=".", gid="chosen")
    c.plot([], [], marker=".", gid="float32")
    # the curves are named at their left end: no legend box to place (or to draw) on each move
    c.text(0, 0, "", fontsize=7, va="bottom", color="C0", gid="chosen_name")
    c.text(0, 0, "float32", fontsize=7, va="top", color="C1", gid="float32_name")
    c.axvline(1, color="grey", linestyle="--", linewidth=1, gid="k")
    c.set_xscale("log", base=2)
    c.set_yscale("log")
    # fixed ticks with plain labels: log labels are mathtext ($10^{-8}$), laid out on every draw
    c.set_xticks(ks, [str(k) for k in ks])
    c.xaxis.set_minor_locator(NullLocator())
    plain_log_ticks(c.yaxis, _DECADES[::2])
    c.set_xlabel("k")
    c.set_ylabel("relative error vs float64")
    c.set_title("", fontsize=10, y=1.0)
    for ax in (a, b):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(4))
    fig.text(0.99, 0.96, "", ha="right", color="tab:red", gid="warning")
    update_explorer(fig, data)
    return fig


def update_explorer(fig: Figure, data: dict) -> None:
    """Move `plot_explorer`'s lines, limits and texts to `data` (`al.precision.explorer_data`)."""
    shapes.explorer("data", data)
    from ..figures import named_artists

    a = named_artists(fig)
    steps = range(len(data["update_norms"]))
    a["norm"].set_data(steps, data["update_norms"])
    a["reference_norm"].set_data(steps, data["reference_update_norms"])
    clipped = data["max_norm"] is not None
    a["limit"].set_visible(clipped)
    if clipped:
        a["limit"].set_ydata([data["lr_max"] * data["max_norm"]] * 2)
    # with clipping off neither the limit line nor a clip of the reference exists: say so
    a["norms"].title.set_text(
        "update size" + (" (dotted: peak lr × max_norm)" if clipped else ", no clipping")
    )
    clip = ", clipped once" if clipped else ""
    fig.legends[0].texts[1].set_text(f"reference: the full batch{clip}, scheduler per step")
    a["lr"].set_data(steps, data["lrs"])
    a["reference_lr"].set_data(steps, data["reference_lrs"])
    for name in ("norms", "lrs"):
        a[name].relim(visible_only=True)
        a[name].autoscale_view()
    sweep = data["precision"]
    names = list(sweep["errors"])  # the chosen precision, then float32 (once if it is float32)
    ks, chosen, single = sweep["ks"], sweep["errors"][names[0]], sweep["errors"][names[-1]]
    a["chosen"].set_data(ks, chosen)
    a["float32"].set_data(ks, single)
    values = [v for v in chosen + single if v > 0]
    low, high = min(values) / 3, max(values) * 30  # room above the curves for the names
    a["errors"].set_xlim(ks[0] / 1.3, ks[-1] * 1.3)
    a["errors"].set_ylim(low, high)
    a["chosen_name"].set_text(names[0] if len(names) > 1 else "float32 (chosen)")
    a["chosen_name"].set_position((ks[0], max(chosen[0], low) * 1.5))
    a["float32_name"].set_text("float32" if len(names) > 1 else "")
    a["float32_name"].set_position((ks[0], max(single[0], low) / 1.5))
    a["k"].set_xdata([data["k"]] * 2)
    a["errors"].set_title(
        f"accumulation error (k = {data['k']}: {data['accumulation_error']:.1e})", fontsize=10
    )
    finite = all(math.isfinite(v) for v in data["update_norms"])
    a["warning"].set_text("" if finite else "non-finite update")
