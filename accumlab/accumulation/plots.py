"""Lessons 00 and 02: the accumulated gradient against the full-batch gradient, as a pure plot."""

from __future__ import annotations

from matplotlib.figure import Figure

MAX_LINES = 8  # more lines than this make a plot unreadable


def plot_accumulation_progress(progress: dict, *, title: str | None = None) -> Figure:
    """Lesson 02: each value's accumulated gradient as micro-batches are added (solid, dots) against
    the full-batch gradient over the same samples (dashed, same colour)."""
    acc = progress["accumulated"]
    full = progress["full"]
    names = progress["names"]
    k = acc.shape[0]
    fig = Figure(figsize=(7, 3.8), layout="constrained")
    ax = fig.add_subplot()
    steps = range(1, k + 1)
    for i in range(min(len(names), MAX_LINES)):
        (line,) = ax.plot(steps, acc[:, i].tolist(), marker="o", label=names[i])
        ax.axhline(float(full[i]), color=line.get_color(), linestyle="--", linewidth=1)
    ax.set_xlabel("micro-batches accumulated")
    ax.set_ylabel("accumulated .grad")
    ax.set_xticks(list(steps))
    shown = "" if len(names) <= MAX_LINES else f" (first {MAX_LINES} of {len(names)} values)"
    ax.set_title(
        title
        or f"accumulated (solid) vs full-batch over {progress['samples']} samples (dashed){shown}",
        fontsize=9,
    )
    ax.legend(fontsize=7, ncol=2, loc="best")
    return fig
