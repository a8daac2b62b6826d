"""Figures from the pure plot functions render as images in a real kernel, not as "Figure(700x380)" text."""

import nbformat
import pytest
from nbclient import NotebookClient

from accumlab.figures import figure_png, plot_bars, show_figures_inline


def test_figure_png_is_a_png():
    assert figure_png(plot_bars(["a", "b"], [1, 2], ylabel="y")).startswith(b"\x89PNG")


def test_outside_ipython_nothing_is_registered():
    assert show_figures_inline() is False


@pytest.mark.slow
def test_kernel_displays_figure_as_png_after_setup():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import accumlab as al\nenv = al.setup()"),
        nbformat.v4.new_code_cell(
            "from accumlab.figures import plot_bars\nplot_bars(['a'], [1.0], ylabel='y')"
        ),
    ]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = nb.cells[1].outputs
    assert any("image/png" in o.get("data", {}) for o in outputs), outputs
