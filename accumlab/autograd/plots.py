"""Lesson 01: graph growth, as a plot built once whose lines an explorer moves."""

from __future__ import annotations

from matplotlib.figure import Figure

from . import shapes

SERIES = (  # key prefix, label, marker, line style (dashed: it lies on top of another line)
    ("summed", "sum n losses, one backward", "o", "-"),
    ("per_sample", "backward after every sample", "s", "-"),
    ("batched", "one batched forward of n", "x", "--"),
)


class GrowthPlot:
    """Callable `rows -> Figure` for `graph_growth` rows: built on the first call, later calls move
    the lines (no new figure, no layout pass)."""

    def __init__(self):
        self.figure: Figure | None = None

    def __call__(self, rows: list[dict]) -> Figure:
        shapes.rows("rows", rows)
        if self.figure is None:
            self._build()
        n = [r["n"] for r in rows]
        for ax, key in zip(self.axes, ("nodes", "saved_bytes")):
            top = 0
            for (prefix, *_), line in zip(SERIES, self.lines[key]):
                ys = [r[f"{prefix}_{key}"] for r in rows]
                line.set_data(n, ys)
                top = max(top, *ys)
            ax.set_xlim(0.5, max(n) + 0.5)
            ax.set_ylim(0, 1.08 * top)
        return self.figure

    def _build(self) -> None:
        self.figure = fig = Figure(figsize=(8, 3.2))
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.16, top=0.86, wspace=0.3)
        self.axes = fig.subplots(1, 2)
        self.lines = {}
        for ax, key, label in zip(
            self.axes, ("nodes", "saved_bytes"), ("backward nodes alive", "saved bytes alive")
        ):
            self.lines[key] = [
                ax.plot([], [], marker=marker, linestyle=style, markersize=4, label=name)[0]
                for _, name, marker, style in SERIES
            ]
            ax.set_xlabel("samples n")
            ax.set_ylabel(label)
        self.axes[0].legend(fontsize=7, loc="upper left")
        fig.suptitle(
            "Summing losses keeps n graphs alive; a batched forward keeps the same bytes in one graph",
            fontsize=10,
        )


def plot_graph_growth(rows: list[dict]) -> Figure:
    """Lesson 01: graph nodes and saved bytes alive at once — summing n losses, backward per sample,
    one batched forward. A new figure per call."""
    return GrowthPlot()(rows)
