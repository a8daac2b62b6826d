"""Lesson 01: graph growth, as a pure plot."""

from __future__ import annotations

from matplotlib.figure import Figure


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
