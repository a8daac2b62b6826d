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
    chance level log(b) — what the loss of a micro-batch of b reads for an encoder that tells
    nothing apart — next to the big batch's."""
    shapes.sweep("sweep", sweep)
    fig = Figure(figsize=(10, 3.3), layout="constrained")
    ax_cos, ax_chance = fig.subplots(1, 2)
    sizes = sweep["sizes"]
    ax_cos.plot(sizes, sweep["cosine"], "o-", color=NAIVE)
    ax_cos.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax_cos.set_xscale("log", base=2)
    ax_cos.set_xticks(sizes, [str(s) for s in sizes])
    ax_cos.set_xlabel("micro-batch size (in-batch negatives = size − 1)")
    ax_cos.set_ylabel("cosine(naive accumulated, big batch)")
    ax_cos.set_title(f"big batch = {max(sizes)} pairs", fontsize=9)
    ax_chance.bar([str(s) for s in sizes], sweep["chance"], color="tab:blue")
    ax_chance.set_xlabel("samples in the batch the loss is computed over")
    ax_chance.set_ylabel("InfoNCE at chance = log(size)")
    ax_chance.set_title("the loss a loop logs depends on the micro-batch size", fontsize=9)
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


def plot_coupling_explorer(data: dict) -> Figure:
    """Lesson 09's explorer: the chosen coupling's gap to the big batch under naive accumulation
    (red) and under the fix (green). Fixed layout and fixed texts: an update moves the two bar
    heights only; the numbers are in the explorer's caption (`coupling_caption`)."""
    shapes.explorer("data", data)
    fig = Figure(figsize=(6, 2.8))
    fig.subplots_adjust(left=0.14, right=0.98, bottom=0.12, top=0.96)
    ax = fig.add_subplot()
    rows = data["rows"]
    xs = list(range(len(rows)))
    ax.bar([x - 0.2 for x in xs], [FLOOR] * len(rows), 0.35, color=NAIVE)
    ax.bar([x + 0.2 for x in xs], [FLOOR] * len(rows), 0.35, color=FIX)
    ticks = [x + d for x in xs for d in (-0.2, 0.2)]
    ax.set_xticks(ticks, ["naive accumulation", "the fix"] * len(rows))
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 3, 30)
    plain_log_ticks(ax.yaxis, [1e-16, 1e-12, 1e-8, 1e-4, 1.0])
    ax.set_ylabel("relative L2 gap to the big batch", fontsize=8)
    ax.axhline(1e-12, color="grey", linestyle=":", linewidth=1)
    update_coupling_figure(fig, data)
    return fig


def update_coupling_figure(fig: Figure, data: dict) -> Figure:
    """Move the bars of `plot_coupling_explorer`'s figure to `data`: the same artists, new
    heights (no text is redrawn)."""
    shapes.explorer_figure("fig", fig, data)
    ax = fig.axes[0]
    for kind, container in zip(("naive", "fix"), ax.containers, strict=True):
        for bar, row in zip(container, data["rows"], strict=True):
            bar.set_height(max(row[kind], FLOOR))
    return fig


def coupling_caption(data: dict) -> str:
    """The explorer's numbers in words (HTML above the figure: text there costs no redraw)."""
    shapes.explorer("data", data)
    chosen = next(r for r in data["rows"] if r["coupling"] == data["coupling"])
    return (
        f"<b>{chosen['coupling']}</b>, micro-batches of {chosen['micro_batch_size']}, "
        f"k = {chosen['accumulation_steps']}: red, {chosen['naive_label']} → gap "
        f"<b>{chosen['naive']:.2g}</b>; green, {chosen['fix_label']} → gap "
        f"<b>{chosen['fix']:.1g}</b>. Dotted: 1e-12, the rounding level; an exact 0 is drawn at "
        f"{FLOOR:g}."
    )
