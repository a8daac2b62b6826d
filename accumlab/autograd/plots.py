"""Lesson 01: graph growth. `plot_graph_growth` builds the figure; the explorer moves its lines with
`update_graph_growth` (no new figure, no layout pass)."""

from __future__ import annotations

from matplotlib.figure import Figure

from . import shapes

SERIES = (  # key prefix, label, marker, line style (dashed: it lies on top of another line)
    ("summed", "sum n losses, one backward", "o", "-"),
    ("per_sample", "backward after every sample", "s", "-"),
    ("batched", "one batched forward of n", "x", "--"),
)
PANELS = (("nodes", "backward nodes alive"), ("saved_bytes", "saved bytes alive"))


def plot_graph_growth(rows: list[dict]) -> Figure:
    """Lesson 01: graph nodes and saved bytes alive at once — summing n losses, backward per sample,
    one batched forward — for `graph_growth` rows. A fixed layout: an explorer moves its lines with
    `update_graph_growth`."""
    shapes.rows("rows", rows)
    fig = Figure(figsize=(8, 3.2))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.16, top=0.86, wspace=0.3)
    for ax, (key, label) in zip(fig.subplots(1, 2), PANELS, strict=True):
        ax.set_gid(key)
        for prefix, name, marker, style in SERIES:
            ax.plot(
                [], [], marker=marker, linestyle=style, markersize=4, label=name,
                gid=f"{prefix}_{key}",
            )  # fmt: skip
        ax.set_xlabel("samples n")
        ax.set_ylabel(label)
    fig.axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(
        "Summing losses keeps n graphs alive; a batched forward keeps the same bytes in one graph",
        fontsize=10,
    )
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
        a[key].set_ylim(0, 1.35 * top)  # the top quarter: room for the legend
