"""Lesson 00 prints what al.setup() found; these checks hold that report to what a Jupyter kernel
really does: the chosen device computes, torch runs the chosen thread count, and figures and graphs
are shown as the report says."""

import nbformat
import pytest
from nbclient import NotebookClient

CHECKS = """
import torch
from IPython import get_ipython
import accumlab as al

env = al.setup()
probe = torch.arange(4.0, device=env.device) * 2
assert probe.device.type == env.device.type and probe.sum().item() == 12.0
assert torch.get_num_threads() == env.threads, "torch runs the thread count al.setup() chose"
formatter = get_ipython().display_formatter
assert "image/png" in formatter.active_types  # a Jupyter kernel, as in the lessons
assert "image/png" in formatter.format(al.plot_bars(["a"], [1.0], ylabel="y"))[0]
w = torch.tensor(1.0, requires_grad=True)
graph_shown = formatter.format(al.draw_graph(w * 3, {"w": w}))[0]
assert ("image/svg+xml" in graph_shown) == env.has_dot, "a picture exactly when dot exists"
"""


@pytest.mark.slow
def test_lesson00_report_matches_what_the_kernel_does():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(CHECKS)]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()  # raises on a failed assert
