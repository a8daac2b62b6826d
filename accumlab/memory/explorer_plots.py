"""Lesson 05's explorer figure: the memory estimate of the chosen micro-batch next to the whole
global batch at once, and their time per optimizer step (median and range of a few timings)."""

from __future__ import annotations

from matplotlib.figure import Figure

from . import shapes
from .plots import _draw_footprints, _stacks


def _explorer_labels(data: dict) -> list[str]:
    # different even at k = 1: the two groups are keys of one dict
    k = data["accumulation_steps"]
    return [f"mb={data['micro_batch_size']} × k={k}", f"mb={data['global_batch']} at once"]


def plot_memory_explorer(data: dict) -> Figure:
    """Lesson 05's explorer: the memory of the chosen micro-batch next to the whole global batch at
    once (left: the two moments, stacked by part), and their ms per optimizer step (right). A
    fixed layout; the explorer moves its bars with `update_memory_explorer`."""
    shapes.explorer("data", data)
    from matplotlib.ticker import MaxNLocator

    labels = _explorer_labels(data)
    fig = Figure(figsize=(9.5, 3.6))
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.12, top=0.9, wspace=0.22)
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    left.set_gid("memory")
    right.set_gid("time")
    _draw_footprints(left, dict(zip(labels, (data["footprint"], data["full_batch"]), strict=True)))
    left.legend(fontsize=6, loc="upper center", ncol=3)  # 2 rows above the bars (see the y limit)
    left.set_xlim(-0.6, 1.6)
    right.bar(labels, [0.0, 0.0], color="tab:purple", gid="seconds")
    # the range of the timings: a busy machine moves single timings a lot
    right.vlines([0, 1], [0.0, 0.0], [0.0, 0.0], colors="black", linewidth=1.5, gid="range")
    right.set_ylabel("ms per optimizer step")
    # y given: the title stays put, instead of being re-placed after measuring the tick labels
    right.set_title("time (median and range of 3 steps)", fontsize=9, y=1.0)
    right.tick_params(axis="x", labelsize=8)
    for ax in (left, right):
        ax.yaxis.set_major_locator(MaxNLocator(5))
    update_memory_explorer(fig, data)
    return fig


def update_memory_explorer(fig: Figure, data: dict) -> None:
    """Move `plot_memory_explorer`'s bars, labels and limits to `data` (`explore_memory(...)`)."""
    shapes.explorer("data", data)
    from ..figures import named_artists

    a = named_artists(fig)
    labels = _explorer_labels(data)
    _, unit, stacks = _stacks(dict(zip(labels, (data["footprint"], data["full_batch"]))))
    top = 0.0
    for i, _, moment, pieces in stacks:
        for part, bottom, height in pieces:
            bar = a[f"{i} {moment} {part}"]
            bar.set_y(bottom)
            bar.set_height(height)
        top = max(top, bottom + height)
        a[f"{i} {moment}"].set_y(bottom + height)
    memory = a["memory"]
    memory.set_ylim(0, top * 1.35)  # room for the moment names and the legend above the bars
    memory.set_ylabel(unit)
    memory.set_xticks([0, 1], labels, fontsize=8)
    memory.set_title(
        f"memory estimate ({data['optimizer']}{', checkpointing' if data['checkpointing'] else ''})",
        fontsize=9,
        y=1.0,
    )
    ms = [data["seconds"] * 1000, data["full_seconds"] * 1000]
    for bar, value in zip(fig.axes[1].patches, ms, strict=True):
        bar.set_height(value)
    ranges = [[1000 * t for t in data[key]] for key in ("seconds_range", "full_seconds_range")]
    a["range"].set_segments([[(i, lo), (i, hi)] for i, (lo, hi) in enumerate(ranges)])
    a["time"].set_ylim(0, max(ms + [hi for _, hi in ranges]) * 1.15)
    a["time"].set_xticks([0, 1], labels)
