"""Lessons 00 and 02: the accumulated gradient against the full-batch gradient. `plot_window_progress`
builds the figure; the explorer moves its lines with `update_window_progress` (no new figure, no
layout pass)."""

from __future__ import annotations

from matplotlib.figure import Figure

from .. import _validate
from . import shapes

MAX_LINES = 8  # more lines than this make a plot unreadable


def plot_window_progress(progress: dict, *, title: str | None = None) -> Figure:
    """Lesson 02: each value's `.grad` as micro-batches are added (solid, dots) against the
    full-batch gradient over the same samples (dashed, same colour), for `window_progress` data.
    A fixed layout: an explorer moves its lines with `update_window_progress`."""
    shapes.progress("progress", progress)
    shapes.title("title", title)
    fig = Figure(figsize=(7, 3.8))
    # a fixed layout: constrained layout would re-measure every tick label on every redraw
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.14, top=0.86)
    ax = fig.add_subplot(gid="progress")
    names = progress["names"]
    for i in range(min(len(names), MAX_LINES)):
        (line,) = ax.plot([], [], marker="o", label=names[i], gid=f"grad {i}")
        ax.axhline(0.0, color=line.get_color(), linestyle="--", linewidth=1, gid=f"full {i}")
    ax.set_xlabel("micro-batch j of the window")
    ax.set_ylabel(".grad after micro-batch j")
    more = len(names) > MAX_LINES
    ax.legend(
        fontsize=7, ncol=4, loc="upper left", title_fontsize=7,
        title=f"the first {MAX_LINES} of {len(names)} values" if more else None,
    )  # fmt: skip
    # y given: the title stays put instead of being re-placed after measuring the axes' texts; a
    # title the caller gives stays, the one made from the data follows it
    ax.set_title(title or "", fontsize=9, y=1.0, gid="title" if title is None else None)
    update_window_progress(fig, progress)
    return fig


def update_window_progress(fig: Figure, progress: dict) -> None:
    """Move `plot_window_progress`'s lines, limits and title to `progress` (`window_progress(...)`
    of the same model: one line per value it was built with)."""
    shapes.progress("progress", progress)
    from ..figures import named_artists

    a = named_artists(fig)
    ax, names = a["progress"], progress["names"]
    drawn = [line.get_label() for line in ax.get_lines() if str(line.get_gid()).startswith("grad")]
    if drawn != names[:MAX_LINES]:
        raise ValueError(
            f"progress['names'] must be the values fig was built for ({drawn}), got "
            f"{names[:MAX_LINES]}: draw another model's progress with plot_window_progress"
        )
    acc, full = progress["accumulated"], progress["full"]
    k = acc.shape[0]
    steps = list(range(1, k + 1))
    for i in range(len(drawn)):
        a[f"grad {i}"].set_data(steps, acc[:, i].tolist())
        a[f"full {i}"].set_ydata([float(full[i])] * 2)
    values = acc[:, : len(drawn)].reshape(-1).tolist() + full[: len(drawn)].tolist()
    lo, hi = min(values), max(values)
    pad = 0.08 * (hi - lo) if hi > lo else 1.0
    ax.set_ylim(lo - pad, hi + 5 * pad)  # the top: room for the legend's rows
    ax.set_xlim(0.5, k + 0.5)
    ax.set_xticks(steps if k <= 16 else steps[:: -(-k // 16)])
    if "title" in a:
        a["title"].set_text(_title(progress))


def drawn_window_progress(fig: Figure) -> dict:
    """What a `plot_window_progress` figure shows, read back from its lines: {"names" (the
    legend's), "accumulated" (k, lines): each solid line's points, "full" (lines,): each dashed
    line's height}. Lesson 02 compares it with the data the figure was drawn from."""
    import torch

    from ..figures import named_artists

    _validate.instance("fig", fig, Figure, "a Figure made by plot_window_progress")
    a = named_artists(fig)
    if "progress" not in a:
        raise ValueError("fig has no axes named 'progress': draw it with plot_window_progress")
    lines = [n for n in a if n.startswith("grad ")]
    solid = [a[f"grad {i}"] for i in range(len(lines))]
    return {
        "names": [line.get_label() for line in solid],
        "accumulated": torch.tensor(
            [list(line.get_ydata()) for line in solid], dtype=torch.float64
        ).T,
        "full": torch.tensor(
            [float(a[f"full {i}"].get_ydata()[0]) for i in range(len(lines))], dtype=torch.float64
        ),
    }


def _title(progress: dict) -> str:
    loop = "zero once per window" if progress["zero_grad"] == "window" else "zero every micro-batch"
    scale = "loss ÷ k" if progress["divide_by_k"] else "loss not ÷ k"
    diff = progress["diff"]
    return (
        f"{loop}, {scale}: solid = .grad, dashed = full batch over {progress['samples']} "
        f"samples\nwhat the optimizer gets vs the full batch: max relative error "
        f"{diff.max_rel:.2g}, cosine {diff.cosine:.4f}"
    )
