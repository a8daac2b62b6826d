"""Pure plotting functions: data in, matplotlib Figure out. No widget code here."""

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


def plot_bars(
    labels: list[str], values: list[float], *, ylabel: str, title: str = "", log: bool = False
) -> Figure:
    """A labelled bar chart; the most common shape in the lessons."""
    fig = Figure(figsize=(6, 3.2), layout="constrained")
    ax = fig.add_subplot()
    ax.bar(labels, values, color="tab:blue")
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="x", labelrotation=20)
    return fig


def plot_graph_growth(rows: list[dict]) -> Figure:
    """Lesson 01: graph nodes and saved bytes alive at once, summing n losses vs backward per sample."""
    n = [r["n"] for r in rows]
    fig = Figure(figsize=(8, 3.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    for ax, key, label in (
        (left, "nodes", "backward nodes alive"),
        (right, "saved_bytes", "saved bytes alive"),
    ):
        ax.plot(
            n, [r[f"summed_{key}"] for r in rows], marker="o", label="sum n losses, one backward"
        )
        ax.plot(n, [r[f"per_sample_{key}"] for r in rows], marker="s", label="backward per sample")
        ax.set_xlabel("samples n")
        ax.set_ylabel(label)
    left.legend(fontsize=8)
    fig.suptitle("Summing losses first builds one graph n times as big", fontsize=10)
    return fig
