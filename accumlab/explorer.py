"""The explorer base every lesson's widgets build on: controls → compute → one figure, updated.

Every explorer keeps its controls in `.controls` and the data it last computed in `.data`, so a
test can set `explorer.controls["k"].value = 3` and assert on `explorer.data` directly. Compute and
plot functions are ordinary functions a test calls without any widget (lesson 02+).

How a change reaches the page, and why it is fast (benchmarks/widget_latency.py measures it):
- the figure is built ONCE by the topic's pure `plot(data)`; a change calls `update(figure, data)`,
  which moves the existing artists (set data, limits, texts) instead of building a new Figure;
- its layout is solved once, at the first draw, then frozen: a layout engine (constrained layout)
  runs again on every draw and measures every text of the figure to do so;
- the PNG is drawn once on an Agg canvas the figure keeps (`bbox_inches="tight"` would add a pass
  over every artist) and its bytes replace those of an `ipywidgets.Image`: one binary comm
  message, no output area cleared and re-created.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as W
from IPython.display import display

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
DPI = 100  # the resolution of the explorer's image: the same as a figure shown in a static cell


class Explorer:
    """Wire `controls` to `compute(**values) -> data`, `plot(data) -> Figure` and, optionally,
    `update(figure, data)` (returns nothing; moves the artists `plot` made to the new data).

    Without `update` each change builds a new figure with `plot` (slower; for figures whose
    artists cannot be moved). `caption(data) -> str` (optional) is HTML shown above the figure:
    numbers in text cost nothing to redraw, while every text drawn in a figure costs a layout.

    The first computation runs in the constructor, outside any widget, so an error there reaches
    the notebook (and nbmake) instead of hiding inside the widget area.
    """

    def __init__(
        self,
        controls: dict[str, W.ValueWidget],
        compute: Callable,
        plot: Callable,
        update: Callable | None = None,
        *,
        caption: Callable | None = None,
    ):
        from ._validate import function, mapping

        controls = mapping("controls", controls)
        for name, control in controls.items():
            if not isinstance(control, W.ValueWidget):
                raise ValueError(
                    f"controls[{name!r}] must be an ipywidgets control with a .value (e.g. "
                    f"al.explorer.int_slider), got {type(control).__name__} {control!r:.60}"
                )
        self.compute = function("compute", compute)
        self.plot = function("plot", plot)
        self.update = None if update is None else function("update", update)
        self.caption = None if caption is None else function("caption", caption)
        self.controls = controls
        self.data = None
        self.figure = None
        self.error: Exception | None = None
        self._shown: dict | None = None  # the control values the figure shows
        self.image = W.Image(format="png")
        self.summary = W.HTML()
        self.output = W.Output()  # shows an error raised by a change; empty otherwise
        self.refresh()
        for control in controls.values():
            control.observe(self._changed, names="value")
        # wrap: several controls on one line would squeeze each slider to a few pixels
        row = W.HBox(list(controls.values()), layout=W.Layout(flex_flow="row wrap"))
        parts = [row, self.summary] if caption is not None else [row]
        self.widget = W.VBox([*parts, self.image, self.output])
        _spare_from_full_collections()

    @property
    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def refresh(self) -> None:
        """Compute for the controls' values, move (or build) the figure, show its PNG."""
        from .figures import render_png

        self.data = self.compute(**self.values)
        built = self.figure is None or self.update is None
        if built:
            self.figure = self.plot(self.data)
            self.figure.set_dpi(DPI)
        else:
            self.update(self.figure, self.data)
        if self.caption is not None:
            self.summary.value = self.caption(self.data)
        self.image.value = render_png(self.figure)
        self._shown = self.values
        if built and self.update is not None:
            # its layout engine ran in that draw; from now on the axes stay where it put them
            # (update() keeps its texts within that room)
            self.figure.set_layout_engine("none")

    def _changed(self, _change) -> None:
        if self.error is None and self.values == self._shown:
            # one move can fire twice: a slider that clamps another (k's maximum follows the
            # micro-batch size) redraws at the clamped values, then the move itself arrives
            return
        try:
            self.refresh()
        except Exception as err:
            self.error = err  # shown to the learner AND kept for tests: never swallowed silently
            with self.output:
                self.output.clear_output(wait=True)
                print(f"{type(err).__name__}: {err}")
            raise
        if self.error is not None:
            self.error = None
            self.output.clear_output()

    def _ipython_display_(self) -> None:
        """The live widget, and beside it, in the same output, the PNG it shows now: a page
        rendered without a kernel (the lessons' static site, an untrusted notebook, GitHub's
        viewer) has no widget to draw and shows that figure of the default state instead. A
        frontend with a widget manager ranks the widget first and shows only the widget."""
        import base64

        bundle = {
            "text/plain": f"{type(self).__name__} of {', '.join(self.controls) or 'no controls'}",
            WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": self.widget.model_id},
            "image/png": base64.b64encode(self.image.value).decode("ascii"),
        }
        display(bundle, raw=True)


def _spare_from_full_collections() -> None:
    """Take every object alive now out of the cyclic garbage collector's full passes.

    A full (generation 2) collection walks every tracked object; with torch, matplotlib and
    ipywidgets loaded a kernel holds about 350k of them, and one pass took 150-370 ms on the
    2-core CPU: most interactions over 300 ms included one (benchmarks/widget_latency.py). The
    objects alive when an explorer is built — libraries, the lesson's earlier cells — live on
    anyway (`gc.freeze` moves them to a generation no collection walks); objects made later are
    collected as before. Young cyclic garbage is collected first, so that it is not kept; a cycle
    that became garbage long ago and is still waiting for a full collection is kept."""
    import gc

    gc.collect(1)
    gc.freeze()


def int_slider(description: str, value: int, lo: int, hi: int) -> W.IntSlider:
    # continuous_update=False: recompute once when the learner lets go, not on every pixel
    return W.IntSlider(
        value=value,
        min=lo,
        max=hi,
        description=description,
        continuous_update=False,
        style={"description_width": "initial"},
    )


def selection_slider(description: str, options, value) -> W.SelectionSlider:
    """A slider over fixed `options` (e.g. micro-batch sizes 1, 2, 4, ...)."""
    return W.SelectionSlider(
        options=list(options),
        value=value,
        description=description,
        continuous_update=False,
        style={"description_width": "initial"},
    )


def explorer_example(arguments: Callable[[], dict]):
    """Mark an explorer factory that needs arguments with how to build it on its own:
    `arguments()` returns the keyword arguments a lesson would pass (computed from scratch).
    `benchmarks/widget_latency.py` and the tests build every explorer this way; a factory whose
    arguments all have defaults needs no mark."""

    def mark(factory):
        factory.example_arguments = arguments
        return factory

    return mark
