"""Show `matplotlib.figure.Figure` objects as images in Jupyter (lesson 00+).

The lessons' plots are pure functions returning a Figure and never touch pyplot, so matplotlib's
inline backend — which registers its image formatter only when pyplot is imported — is never
activated. Without a formatter a Figure displays as the text "Figure(700x380)".
"""

from __future__ import annotations

import io


def figure_png(fig, dpi: int = 100) -> bytes:
    """The figure as PNG, the way a static cell shows it. No `bbox_inches="tight"`: it measures
    every artist in an extra pass (for a figure without a layout engine, a second full draw), and
    the lessons' figures are laid out by constrained layout (or a fixed layout) to fill their
    canvas already."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def render_png(fig) -> bytes:
    """The figure as PNG at its own dpi, drawn once on the Agg canvas it keeps between calls (an
    explorer's redraw). A new canvas per call would also throw away matplotlib's cache of text
    metrics, which is kept per renderer (the canvas holds one)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    # light compression: the bytes go to the browser once, not to disk
    canvas.print_png(buffer, pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


def named_artists(fig) -> dict:
    """{name: artist} for the figure's axes, and the artists in it, that were given a name
    (`gid=`) when it was built: how an explorer's update function finds what its plot function
    drew, without keeping a second object beside the figure."""
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise ValueError(
            "fig must be the matplotlib Figure the explorer's plot function built, got "
            f"{type(fig).__name__} {fig!r:.60}"
        )
    named = _Named()
    for artist in (*fig.get_children(), *(a for ax in fig.axes for a in ax.get_children())):
        if artist.get_gid() is not None:
            named[artist.get_gid()] = artist
    return named


class _Named(dict):
    def __missing__(self, gid):
        # an update function handed a figure some other plot function built
        raise ValueError(
            f"fig has no artist named {gid!r}: pass the figure this explorer's plot function built"
        )


def plain_log_ticks(axis, ticks) -> None:
    """Fixed major ticks at `ticks` with plain labels ("1e-08") and no minor ticks on a log-scale
    `axis` (e.g. `ax.yaxis`): the default labels are mathtext ($10^{-8}$), and their layout on every
    draw is most of what an explorer's redraw costs."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    axis.set_major_locator(FixedLocator(list(ticks)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0e}"))
    axis.set_minor_locator(NullLocator())


def show_figures_inline() -> bool:
    """Register a PNG formatter for Figure in the running IPython shell; False outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    from matplotlib.figure import Figure

    shell.display_formatter.formatters["image/png"].for_type(Figure, figure_png)
    return True


def _figure(**kwargs):
    from matplotlib.figure import (
        Figure,  # here: matplotlib costs time that `import accumlab` should not
    )

    return Figure(**kwargs)


def plot_bars(
    labels: list[str], values: list[float], *, ylabel: str, title: str = "", log: bool = False
):
    """A labelled bar chart (any lesson)."""
    from ._validate import finite_float, flag, sequence

    labels, values = sequence("labels", labels), sequence("values", values)
    if len(labels) != len(values):
        raise ValueError(
            f"labels and values must have the same length, got {len(labels)} and {len(values)}"
        )
    values = [finite_float(f"values[{i}]", v) for i, v in enumerate(values)]
    if flag("log", log) and min(values) <= 0:
        raise ValueError(f"values must all be > 0 on a log axis (log=True), got {min(values)}")
    fig = _figure(figsize=(6, 3.2), layout="constrained")
    ax = fig.add_subplot()
    ax.bar(labels, values, color="tab:blue")
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="x", labelrotation=20)
    return fig
