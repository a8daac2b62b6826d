"""Lesson 01 (al.autograd): bad inputs and what each must do."""

from __future__ import annotations

import torch
from fuzz_harness import bad, handled
from matplotlib.figure import Figure

import accumlab as al

from . import NAN, data

G = al.autograd


def _rows():
    return G.graph_growth(al.mlp(), data(), 3)


# fmt: off
CASES = [
    # summed.py
    bad("autograd.summed_loss_graph", "n=10**6", lambda: G.summed_loss_graph(al.mlp(), data(), 10**6), "n"),
    bad("autograd.summed_loss_graph", "model 'x'", lambda: G.summed_loss_graph("x", data(), 2), "model", "str"),
    bad("autograd.summed_loss_graph", "data 'x'", lambda: G.summed_loss_graph(al.mlp(), "x", 2), "data", "str"),
    bad("autograd.summed_loss_graph", "loss 'MSE'", lambda: G.summed_loss_graph(al.mlp(), data(), 2, loss="MSE"), "loss", "'MSE'"),
    bad("autograd.graph_growth", "n=0", lambda: G.graph_growth(al.mlp(), data(), 0), "n", "0"),
    bad("autograd.graph_growth", "n 2.0", lambda: G.graph_growth(al.mlp(), data(), 2.0), "n", "2.0"),
    bad("autograd.graph_growth", "model without parameters", lambda: G.graph_growth(torch.nn.ReLU(), data(), 2), "model", "no parameters"),
    bad("autograd.graph_growth", "y (8,) against an output (8, 1)", lambda: G.graph_growth(al.mlp(), al.Data(data().x, data().y[:, 0]), 2), "(1, 1)", "(1,)"),
    bad("autograd.graph_growth", "5 features into a 4-feature model", lambda: G.graph_growth(al.mlp(), data(features=5), 2), "(1, 5)"),
    bad("autograd.graph_growth", "nan in x", lambda: G.graph_growth(al.mlp(), al.Data(data().x * NAN, data().y), 2), "data.x", "nan"),
    bad("autograd.graph_growth", "micro_batch=0", lambda: G.graph_growth(al.mlp(), data(), 4, micro_batch=0), "micro_batch", "0"),
    bad("autograd.graph_growth", "micro_batch above n", lambda: G.graph_growth(al.mlp(), data(), 4, micro_batch=8), "micro_batch", "8"),
    bad("autograd.graph_growth", "n not a multiple of micro_batch", lambda: G.graph_growth(al.mlp(), data(), 6, micro_batch=4), "multiple of micro_batch", "6"),
    bad("autograd.graph_growth", "micro_batch 2.0", lambda: G.graph_growth(al.mlp(), data(), 4, micro_batch=2.0), "micro_batch", "2.0"),
    bad("autograd.graph_growth", "autocast 'yes'", lambda: G.graph_growth(al.mlp(), data(), 2, autocast="yes"), "autocast", "'yes'"),
    bad("autograd.graph_growth", "autocast on a float64 model", lambda: G.graph_growth(al.mlp(), data(), 2, autocast=True), "autocast", "float64"),
    handled("autograd.graph_growth", "autocast on float32", lambda: G.graph_growth(al.mlp().float(), data().to(dtype=torch.float32), 2, autocast=True), lambda rows: rows[-1]["summed_saved_bytes"] > rows[-1]["batched_saved_bytes"]),
    # forwards.py
    bad("autograd.weight_normed", "model 'x'", lambda: G.weight_normed("x"), "model", "str"),
    bad("autograd.weight_normed", "a model without Linear layers", lambda: G.weight_normed(torch.nn.Conv1d(1, 1, 1)), "model", "nn.Linear"),
    handled("autograd.weight_normed", "an mlp", lambda: G.weight_normed(al.mlp()), lambda m: sum("original0" in n for n, _ in m.named_parameters()) == 3),
    # saved.py
    bad("autograd.saved_tensors_of", "grad_fn 'x'", lambda: G.saved_tensors_of("x"), "grad_fn", "'x'"),
    bad("autograd.saved_tensors_of", "grad_fn None (a leaf)", lambda: G.saved_tensors_of(None), "grad_fn", "None"),
    bad("autograd.saved_tensors_of", "a tensor instead of its grad_fn", lambda: G.saved_tensors_of(torch.ones(2, requires_grad=True) * 2), "grad_fn"),
    handled("autograd.saved_tensors_of", "mul saves its inputs", lambda: G.saved_tensors_of((torch.ones(2, requires_grad=True) * torch.ones(2)).grad_fn), lambda s: set(s) == {"self", "other"}),
    bad("autograd.saved_bytes_around_backward", "model 'x'", lambda: G.saved_bytes_around_backward("x", data()), "model", "str"),
    bad("autograd.saved_bytes_around_backward", "data 'x'", lambda: G.saved_bytes_around_backward(al.mlp(), "x"), "data", "str"),
    bad("autograd.saved_bytes_around_backward", "loss 'MSE'", lambda: G.saved_bytes_around_backward(al.mlp(), data(), loss="MSE"), "loss", "'MSE'"),
    bad("autograd.saved_bytes_around_backward", "y (8,) against an output (8, 1)", lambda: G.saved_bytes_around_backward(al.mlp(), al.Data(data().x, data().y[:, 0])), "(8, 1)", "(8,)"),
    bad("autograd.saved_bytes_around_backward", "5 features into a 4-feature model", lambda: G.saved_bytes_around_backward(al.mlp(), data(features=5)), "(8, 5)"),
    # plots.py
    bad("autograd.plot_graph_growth", "rows 'abc'", lambda: G.plot_graph_growth("abc"), "rows", "str"),
    bad("autograd.plot_graph_growth", "rows []", lambda: G.plot_graph_growth([]), "rows"),
    bad("autograd.plot_graph_growth", "a row missing its keys", lambda: G.plot_graph_growth([{"n": 1}]), "rows[0]", "summed_nodes"),
    bad("autograd.plot_graph_growth", "rows a dict", lambda: G.plot_graph_growth(_rows()[-1]), "rows", "dict"),
    bad("autograd.update_graph_growth", "rows {}", lambda: G.update_graph_growth(Figure(), {}), "rows", "dict"),
    bad("autograd.update_graph_growth", "a figure plot_graph_growth did not build", lambda: G.update_graph_growth(Figure(), _rows()), "fig", "no artist named"),
    bad("autograd.graph_growth_caption", "rows []", lambda: G.graph_growth_caption([]), "rows"),
    bad("autograd.graph_growth_caption", "a row missing its keys", lambda: G.graph_growth_caption([{"n": 1}]), "rows[0]", "summed_nodes"),
    handled("autograd.graph_growth_caption", "rows of 3 samples", lambda: G.graph_growth_caption(_rows()), lambda text: "n = 3" in text),
    # explorer.py
    bad("autograd.graph_growth_explorer", "model 'x'", lambda: G.graph_growth_explorer(model="x"), "model", "str"),
    bad("autograd.graph_growth_explorer", "data 'x'", lambda: G.graph_growth_explorer(data="x"), "data", "str"),
    bad("autograd.graph_growth_explorer", "data of 10**5 samples", lambda: G.graph_growth_explorer(data=al.regression_data(10**5, 4)), "data"),
]
# fmt: on
