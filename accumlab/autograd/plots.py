"""Lesson 01: what four loops keep alive. `plot_graph_growth` builds the figure; the explorer moves
its lines with `update_graph_growth` (no new figure, no layout pass) and writes the numbers at the
chosen n above it with `graph_growth_caption`."""

from __future__ import annotations

import html

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from . import shapes

# Loops that often coincide (the sum and the logging loop hold the same nodes; accumulation and
# the batched forward one forward's; the sum and the batched forward the same bytes when a forward
# saves activations only) are drawn as a wide translucent band and a thin dashed line on top of it,
# so that both stay visible when they coincide and when they part.
SERIES = (  # key prefix, label, marker, line style, line width, opacity
    ("summed", "sum the micro-batch losses, one backward", "o", "-", 5.0, 0.35),
    ("accumulated", "backward after every micro-batch", "s", "-", 5.0, 0.35),
    ("logged", "backward after every micro-batch, total += loss kept", "x", "--", 1.3, 1.0),
    ("batched", "one batched forward of n samples", "+", "--", 1.3, 1.0),
)
PANELS = (("nodes", "backward nodes the loop holds"), ("saved_bytes", "most saved bytes alive"))


def plot_graph_growth(rows: list[dict]) -> Figure:
    """Lesson 01: for `graph_growth` rows, the nodes each loop holds and the most bytes saved for
    backward alive at once, against the number of samples n. A fixed layout: an explorer moves
    its lines with `update_graph_growth`."""
    shapes.rows("rows", rows)
    fig = Figure(figsize=(8, 3.6))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.14, top=0.74, wspace=0.3)
    for ax, (key, label) in zip(fig.subplots(1, 2), PANELS, strict=True):
        ax.set_gid(key)
        for prefix, name, marker, style, width, alpha in SERIES:
            ax.plot(
                [], [], marker=marker, linestyle=style, linewidth=width, alpha=alpha,
                markersize=5, label=name, gid=f"{prefix}_{key}",
            )  # fmt: skip
        ax.set_xlabel("samples n")
        ax.set_ylabel(label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # n is a count: no 2.5
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    # one legend for both panels: the same four loops on each
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=2, fontsize=7, bbox_to_anchor=(0.5, 0.93))
    fig.suptitle("What each loop keeps alive after n samples", fontsize=10, y=0.99)
    update_graph_growth(fig, rows)
    return fig


def update_graph_growth(fig: Figure, rows: list[dict]) -> None:
    """Move `plot_graph_growth`'s lines and limits to `rows` (`graph_growth(...)`)."""
    shapes.rows("rows", rows)
    from ..figures import named_artists

    a = named_artists(fig)
    n = [r["n"] for r in rows]
    for key, _ in PANELS:
        top = 1  # a positive upper limit even if every count were 0
        for prefix, *_ in SERIES:
            ys = [r[f"{prefix}_{key}"] for r in rows]
            a[f"{prefix}_{key}"].set_data(n, ys)
            top = max(top, *ys)
        a[key].set_xlim(min(n) - 0.5, max(n) + 0.5)
        a[key].set_ylim(0, 1.1 * top)


def graph_growth_caption(rows: list[dict]) -> str:
    """The explorer's line above the figure: each loop's numbers at the last n of `rows`."""
    last = shapes.rows("rows", rows)[-1]
    cells = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{last[f'{prefix}_nodes']}</td>"
        f"<td>{last[f'{prefix}_saved_bytes']}</td></tr>"
        for prefix, name, *_ in SERIES
    )
    return (
        f"<b>n = {last['n']}</b> samples in micro-batches of {rows[0]['n']}"
        "<table><tr><th>loop</th><th>nodes held</th>"
        f"<th>most saved bytes alive</th></tr>{cells}</table>"
    )
