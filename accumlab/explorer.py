"""Thin widget builders: controls → a plain compute function → a pure plot function.

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


def accumulation_explorer(model=None, data=None, *, loss: str = "mse") -> Explorer:
    """Lesson 02: micro-batch size and accumulation steps → accumulated vs full-batch gradient.

    Slider ranges keep micro_batch_size × k within the data, so no invalid value is reachable.
    """
    from .data import regression_data
    from .models import mlp
    from .plots import plot_accumulation_progress
    from .reference import accumulation_progress

    data = data if data is not None else regression_data(n=32, features=2, seed=0)
    model = model if model is not None else mlp(features=2, hidden=3, depth=1, seed=0)
    n = len(data)
    mb = int_slider("micro-batch size", 4, 1, n)
    k = int_slider("accumulation steps k", 4, 1, n // 4)

    def clamp_k(change):
        k.max = max(1, n // change["new"])  # keeps micro_batch_size × k ≤ n

    mb.observe(clamp_k, names="value")

    def compute(micro_batch_size: int, accumulation_steps: int):
        return accumulation_progress(model, data, micro_batch_size, accumulation_steps, loss=loss)

    explorer = Explorer(
        {"micro_batch_size": mb, "accumulation_steps": k}, compute, plot_accumulation_progress
    )
    return explorer


def graph_growth_explorer(model=None, data=None) -> Explorer:
    """Lesson 01: how many samples are summed before backward → graph size and saved bytes."""
    from .data import regression_data
    from .graph import summed_loss_graph
    from .models import mlp
    from .plots import plot_graph_growth

    data = data if data is not None else regression_data(n=32, features=4, seed=0)
    model = model if model is not None else mlp(features=4, hidden=16, depth=2, seed=0)
    n = int_slider("samples summed n", 8, 1, len(data))

    def compute(n: int):
        return [summed_loss_graph(model, data, i) for i in range(1, n + 1)]

    return Explorer({"n": n}, compute, plot_graph_growth)
