"""The explorer base every lesson's widgets build on: controls → compute → pure plot function.

Every explorer keeps its controls in `.controls` and the data it last computed in `.data`, so a
test can set `explorer.controls["k"].value = 3` and assert on `explorer.data` directly. Compute and
plot functions are ordinary functions a test calls without any widget (lesson 02+).
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as W
from IPython.display import display


class Explorer:
    """Wire `controls` to `compute(**values) -> data` and `plot(data) -> Figure`.

    The first computation runs in the constructor, outside any Output widget, so an error there
    reaches the notebook (and nbmake) instead of hiding inside the widget area.
    """

    def __init__(self, controls: dict[str, W.ValueWidget], compute: Callable, plot: Callable):
        from ._validate import function, mapping

        controls = mapping("controls", controls)
        for name, control in controls.items():
            if not isinstance(control, W.ValueWidget):
                raise ValueError(
                    f"controls[{name!r}] must be an ipywidgets control with a .value (e.g. "
                    f"al.explorer.int_slider), got {type(control).__name__} {control!r:.60}"
                )
        function("compute", compute)
        function("plot", plot)
        self.controls = controls
        self.compute = compute
        self.plot = plot
        self.output = W.Output()
        self.data = None
        self.figure = None
        self.error: Exception | None = None
        from .figures import show_figures_inline

        show_figures_inline()  # an explorer built without al.setup() still draws its figure
        self.refresh()
        for control in controls.values():
            control.observe(self._changed, names="value")
        # wrap: several controls on one line would squeeze each slider to a few pixels
        row = W.HBox(list(controls.values()), layout=W.Layout(flex_flow="row wrap"))
        self.widget = W.VBox([row, self.output])

    @property
    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def refresh(self) -> None:
        self.data = self.compute(**self.values)
        self.figure = self.plot(self.data)
        with self.output:
            self.output.clear_output(wait=True)
            display(self.figure)

    def _changed(self, _change) -> None:
        try:
            self.refresh()
            self.error = None
        except (
            Exception
        ) as err:  # shown to the learner AND kept for tests: never swallowed silently
            self.error = err
            with self.output:
                self.output.clear_output(wait=True)
                print(f"{type(err).__name__}: {err}")
            raise

    def _ipython_display_(self) -> None:
        display(self.widget)


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
