"""Lesson 09's pure plots: data in, matplotlib Figure out; never pyplot state. The explorer's
figure has a fixed layout and is updated in place (`update_coupling_figure`), never rebuilt."""

from __future__ import annotations

from matplotlib.figure import Figure

from ..figures import plain_log_ticks
from . import shapes

FLOOR = 1e-17  # a gap of exactly 0 is drawn here: a log axis cannot show 0
NAIVE, FIX = "tab:red", "tab:green"


def _floor(values) -> list[float]:
    return [max(float(v), FLOOR) for v in values]


def plot_gaps(
    gaps: dict, *, title: str = "", ylabel: str = "relative L2 gap to the big batch"
) -> Figure:
    """One bar per label, log scale: {label: gap}; green when at rounding level (≤ 1e-12)."""
    shapes.gaps("gaps", gaps)
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.add_subplot()
    labels = list(gaps)
    colours = [FIX if g <= 1e-12 else NAIVE for g in gaps.values()]
    bars = ax.bar(labels, _floor(gaps.values()), color=colours)
    ax.bar_label(bars, labels=[f"{g:.2g}" for g in gaps.values()], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 3, 30)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_title(title or f"green: rounding level; an exact 0 is drawn at {FLOOR:g}", fontsize=9)
    ax.tick_params(axis="x", labelsize=8, labelrotation=10)
    return fig


def plot_contrastive_sweep(sweep: dict) -> Figure:
    """Left: naive accumulation vs the big batch (gradient cosine) per micro-batch size. Right: the
    loss such a loop logs for the same weights (the mean of its micro-batch losses; at the full
    size, the big batch's loss), with the chance level log(size) — what a micro-batch of that size
    reads for an encoder that tells nothing apart — marked on each bar."""
    shapes.sweep("sweep", sweep)
    fig = Figure(figsize=(10, 3.3), layout="constrained")
    ax_cos, ax_loss = fig.subplots(1, 2)
    sizes = sweep["sizes"]
    ax_cos.plot(sizes, sweep["cosine"], "o-", color=NAIVE)
    ax_cos.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax_cos.set_xscale("log", base=2)
    ax_cos.set_xticks(sizes, [str(s) for s in sizes])
    ax_cos.set_xlabel("micro-batch size (in-batch negatives = size − 1)")
    ax_cos.set_ylabel("cosine(naive accumulated, big batch)")
    ax_cos.set_title(f"big batch = {max(sizes)} pairs", fontsize=9)
    # bars by increasing size, as the log axis on the left runs
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    labels = [str(sizes[i]) for i in order]
    losses, chance = ([values[i] for i in order] for values in (sweep["loss"], sweep["chance"]))
    ax_loss.bar(labels, losses, color="tab:blue", label="logged loss (same weights)")
    ax_loss.plot(
        labels, chance, "_", color="black", markersize=22, mew=2, label="chance: log(size)"
    )
    ax_loss.set_xlabel("micro-batch size the loss is computed over")
    ax_loss.set_ylabel("InfoNCE")
    ax_loss.set_title("the loss a loop logs falls with the micro-batch size", fontsize=9)
    ax_loss.legend(fontsize=8, loc="upper left")  # the tall bars and marks are on the right
    return fig


def _styled_lines(ax, xs, curves: dict) -> None:
    """Red for curves with a real gap, green for curves at rounding level (≤ 1e-12); line styles
    tell apart the curves of one colour."""
    used = {NAIVE: 0, FIX: 0}
    styles = ["o-", "s--", "^:", "d-."]
    for label, ys in curves.items():
        colour = FIX if max(ys) <= 1e-12 else NAIVE
        ax.plot(xs, _floor(ys), styles[used[colour] % len(styles)], color=colour, label=label)
        used[colour] += 1


def plot_ema(steps: list[int], gaps: dict, *, title: str = "") -> Figure:
    """Relative gap of the EMA weights to the big batch's EMA after each optimizer step, one line
    per label ({label: gaps})."""
    shapes.curves("gaps", gaps, "steps", steps)
    fig = Figure(figsize=(6.5, 3.3), layout="constrained")
    ax = fig.add_subplot()
    _styled_lines(ax, steps, gaps)
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 3, 1)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("‖EMA − big-batch EMA‖ / ‖big-batch EMA‖", fontsize=8)
    ax.set_title(title or f"an exact 0 is drawn at {FLOOR:g}", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def plot_gap_sweep(
    sizes: list[int], curves: dict, *, xlabel: str = "micro-batch size", title: str = ""
) -> Figure:
    """Gap to the big batch against micro-batch size, one line per label ({label: gaps}); red:
    a real gap, green: rounding level."""
    shapes.curves("curves", curves, "sizes", sizes)
    fig = Figure(figsize=(6.5, 3.3), layout="constrained")
    ax = fig.add_subplot()
    _styled_lines(ax, sizes, curves)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 3, 30)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("relative L2 gap to the big batch", fontsize=8)
    ax.set_title(title or f"an exact 0 is drawn at {FLOOR:g}", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def plot_aux_sweep(sweep: dict) -> Figure:
    """`aux_loss_sweep`'s gaps, one panel per token order, on a linear axis: each mode's curve for
    the first seed (thick) and for every other seed (thin), against k = tokens ÷ micro-batch."""
    shapes.aux_sweep("sweep", sweep)
    fig = Figure(figsize=(10, 3.4), layout="constrained")
    axes = fig.subplots(1, len(sweep["gaps"]))  # own y ranges: the shuffled gaps are small
    sizes = sweep["sizes"]
    xs = list(range(len(sizes)))
    colours = {"per_micro_batch": NAIVE, "running_counts": "tab:orange", "global_counts": FIX}
    names = {
        "per_micro_batch": "per micro-batch",
        "running_counts": "running counts",
        "global_counts": "global counts",
    }
    for ax, (order, modes) in zip(axes, sweep["gaps"].items(), strict=True):
        for mode, per_seed in modes.items():
            for i, ys in enumerate(per_seed):
                first = i == 0
                ax.plot(
                    xs,
                    ys,
                    "o-" if first else "-",
                    color=colours.get(mode, "grey"),
                    linewidth=2 if first else 0.7,
                    alpha=1 if first else 0.35,
                    label=f"{names.get(mode, mode)} (seed {sweep['seeds'][0]}; thin: "
                    f"{len(per_seed) - 1} other seeds)"
                    if first
                    else None,
                )
        ax.set_xticks(xs, [f"{s}\n(k = {sweep['window'] // s})" for s in sizes], fontsize=8)
        ax.set_xlabel("micro-batch size", fontsize=8)
        ax.set_title(f"tokens {order}", fontsize=9)
    axes[0].set_ylabel("relative L2 gap to the big batch", fontsize=8)
    axes[0].legend(fontsize=7, loc="upper left")
    return fig


def plot_partition_gaps(gaps: dict, *, title: str = "") -> Figure:
    """One dot per random split of the samples over ranks and micro-batches, per aggregation
    ({aggregation: [gap per split]}), against the big batch with the same aggregation."""
    shapes.partition_gaps("gaps", gaps)
    fig = Figure(figsize=(7.5, 3.3), layout="constrained")
    ax = fig.add_subplot()
    for i, ys in enumerate(gaps.values()):
        colour = FIX if max(ys) <= 1e-12 else NAIVE
        ax.plot([i] * len(ys), _floor(ys), "o", color=colour, alpha=0.7)
    ax.set_xticks(range(len(gaps)), list(gaps), fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 3, 30)
    ax.set_ylabel("relative L2 gap to the big batch", fontsize=8)
    ax.set_title(title or "one dot per way of splitting the same samples", fontsize=9)
    return fig


RUNNING = "tab:orange"
KINDS = ("naive", "running", "fix")  # the explorer's bars, left to right


def _explorer_title(row: dict) -> str:
    tokens = f", tokens {row['tokens']}" if row["coupling"] == "aux_loss" else ""
    return (
        f"{row['coupling']}: micro-batches of {row['micro_batch_size']}, "
        f"k = {row['accumulation_steps']}{tokens}"
    )


def plot_coupling_explorer(data: dict) -> Figure:
    """Lesson 09's explorer: the chosen coupling's gap to the big batch under naive accumulation
    (red), running counts (orange; the load-balancing loss only) and the fix (green). Fixed
    layout: an update moves the bar heights and the title's text; the numbers are in the
    explorer's caption (`coupling_caption`)."""
    shapes.explorer("data", data)
    fig = Figure(figsize=(6.4, 2.9))
    fig.subplots_adjust(left=0.13, right=0.98, bottom=0.17, top=0.9)
    ax = fig.add_subplot()
    rows = data["rows"]
    xs = list(range(len(rows)))
    width = 0.26
    offsets = dict(zip(KINDS, (-0.3, 0.0, 0.3), strict=True))
    for kind, colour in zip(KINDS, (NAIVE, RUNNING, FIX), strict=True):
        ax.bar([x + offsets[kind] for x in xs], [FLOOR] * len(rows), width, color=colour)
    ticks = [x + offsets[kind] for x in xs for kind in KINDS]
    names = ["naive accumulation", "running counts\n(aux_loss only)", "the fix"]
    ax.set_xticks(ticks, names * len(rows), fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 3, 30)
    plain_log_ticks(ax.yaxis, [1e-16, 1e-12, 1e-8, 1e-4, 1.0])
    ax.set_ylabel("relative L2 gap to the big batch", fontsize=8)
    ax.axhline(1e-12, color="grey", linestyle=":", linewidth=1)
    ax.set_title(_explorer_title(rows[0]), fontsize=9, y=1.0, gid="coupling-title")
    update_coupling_figure(fig, data)
    return fig


def update_coupling_figure(fig: Figure, data: dict) -> Figure:
    """Move the bars of `plot_coupling_explorer`'s figure to `data`: the same artists, new
    heights; a coupling without running counts hides that bar. The title's text follows."""
    shapes.explorer_figure("fig", fig, data)
    ax = fig.axes[0]
    for kind, container in zip(KINDS, ax.containers, strict=True):
        for bar, row in zip(container, data["rows"], strict=True):
            value = row[kind]
            bar.set_visible(value is not None)
            bar.set_height(FLOOR if value is None else max(value, FLOOR))
    ax.title.set_text(_explorer_title(data["rows"][0]))
    return fig


def coupling_caption(data: dict) -> str:
    """The explorer's numbers in words (HTML above the figure: text there costs no redraw)."""
    shapes.explorer("data", data)
    chosen = next(r for r in data["rows"] if r["coupling"] == data["coupling"])
    running = (
        ""
        if chosen["running"] is None
        else f"; orange, running counts → gap <b>{chosen['running']:.2g}</b>"
    )
    lone = ""
    if chosen["coupling"] == "contrastive" and chosen["micro_batch_size"] == 1:
        # a pair alone: one logit, softmax 1, so InfoNCE and its gradient are exactly 0
        lone = (
            " A micro-batch of 1 has no in-batch negative: its loss and gradient are 0, so "
            "naive accumulation's gap is 1."
        )
    return (
        f"<b>{chosen['coupling']}</b> ({chosen['data']}), micro-batches of "
        f"{chosen['micro_batch_size']}, k = {chosen['accumulation_steps']}: red, "
        f"{chosen['naive_label']} → gap <b>{chosen['naive']:.2g}</b>{running}; green, "
        f"{chosen['fix_label']} → gap <b>{chosen['fix']:.1g}</b>. Dotted: 1e-12, the rounding "
        f"level; an exact 0 is drawn at {FLOOR:g}.{lone}"
    )
