"""Lessons 00 and 02: the accumulated gradient against the full-batch gradient, as a plot that is
built once and then only has its lines moved (an explorer redraw stays cheap)."""

from __future__ import annotations

from matplotlib.figure import Figure

from . import shapes

MAX_LINES = 8  # more lines than this make a plot unreadable


class ProgressPlot:
    """Callable `data -> Figure` for `window_progress` data. The first call builds the figure; later
    calls with the same parameter names move the lines and rescale, without a new layout pass."""

    def __init__(self, *, title: str | None = None):
        self.title = shapes.title("title", title)
        self.figure: Figure | None = None
        self._names: list[str] | None = None

    def __call__(self, progress: dict) -> Figure:
        shapes.progress("progress", progress)
        if self.figure is None or progress["names"] != self._names:
            self._build(progress["names"])
        self._update(progress)
        return self.figure

    def _build(self, names: list[str]) -> None:
        self._names = list(names)
        # a fixed layout: constrained layout would re-measure every tick label on every redraw
        self.figure = fig = Figure(figsize=(7, 3.8))
        fig.subplots_adjust(left=0.1, right=0.97, bottom=0.14, top=0.86)
        self.ax = ax = fig.add_subplot()
        self.lines, self.levels = [], []
        for i in range(min(len(names), MAX_LINES)):
            (line,) = ax.plot([], [], marker="o", label=names[i])
            level = ax.axhline(0.0, color=line.get_color(), linestyle="--", linewidth=1)
            self.lines.append(line)
            self.levels.append(level)
        ax.set_xlabel("micro-batches accumulated")
        ax.set_ylabel(".grad after the micro-batch")
        ax.legend(fontsize=7, ncol=2, loc="upper left")

    def _update(self, progress: dict) -> None:
        acc, full = progress["accumulated"], progress["full"]
        k = acc.shape[0]
        steps = list(range(1, k + 1))
        for i, (line, level) in enumerate(zip(self.lines, self.levels)):
            line.set_data(steps, acc[:, i].tolist())
            level.set_ydata([float(full[i])] * 2)
        shown = len(self.lines)
        values = acc[:, :shown].reshape(-1).tolist() + full[:shown].tolist()
        lo, hi = min(values), max(values)
        pad = 0.08 * (hi - lo) if hi > lo else 1.0
        self.ax.set_ylim(lo - pad, hi + pad)
        self.ax.set_xlim(0.5, k + 0.5)
        self.ax.set_xticks(steps if k <= 16 else steps[:: -(-k // 16)])
        diff = progress["diff"]
        loop = (
            "zero once per window"
            if progress["zero_grad"] == "window"
            else "zero every micro-batch"
        )
        scale = "loss ÷ k" if progress["divide_by_k"] else "loss not ÷ k"
        extra = (
            ""
            if len(self._names) <= MAX_LINES
            else f"; first {MAX_LINES} of {len(self._names)} values"
        )
        self.ax.set_title(
            self.title
            or f"{loop}, {scale}: solid = .grad, dashed = full batch over {progress['samples']} "
            f"samples{extra}\nwhat the optimizer gets vs the full batch: max relative error "
            f"{diff.max_rel:.2g}, cosine {diff.cosine:.4f}",
            fontsize=9,
        )


def plot_window_progress(progress: dict, *, title: str | None = None) -> Figure:
    """Lesson 02: each value's `.grad` as micro-batches are added (solid, dots) against the
    full-batch gradient over the same samples (dashed, same colour). A new figure per call."""
    return ProgressPlot(title=title)(progress)
