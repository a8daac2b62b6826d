"""Lessons 00 and 02 (al.accumulation): bad inputs and what each must do."""

from __future__ import annotations

import torch
from fuzz_harness import bad, handled
from matplotlib.figure import Figure

import accumlab as al

from . import NAN, data

A = al.accumulation


def _small():
    return al.mlp(features=4, hidden=3, depth=1)


def _progress(**kw):
    return A.window_progress(_small(), data(), 2, 2, **kw)


# fmt: off
CASES = [
    # progress.py
    bad("accumulation.window_progress", "model 'x'", lambda: A.window_progress("x", data(), 2, 2), "model", "str"),
    bad("accumulation.window_progress", "data 'x'", lambda: A.window_progress(_small(), "x", 2, 2), "data", "str"),
    bad("accumulation.window_progress", "micro_batch_size=0", lambda: A.window_progress(_small(), data(), 0, 2), "micro_batch_size", "0"),
    bad("accumulation.window_progress", "window larger than the data", lambda: A.window_progress(_small(), data(), 4, 4), "16", "8"),
    bad("accumulation.window_progress", "zero_grad 'Window'", lambda: _progress(zero_grad="Window"), "zero_grad", "'window'"),
    bad("accumulation.window_progress", "divide_by_k 'yes'", lambda: _progress(divide_by_k="yes"), "divide_by_k", "'yes'"),
    bad("accumulation.window_progress", "loss 'MSE'", lambda: _progress(loss="MSE"), "loss", "'MSE'"),
    bad("accumulation.window_progress", "nan in x", lambda: A.window_progress(_small(), al.Data(data().x * NAN, data().y), 2, 2), "data.x", "nan"),
    bad("accumulation.window_progress", "y (8,) against an output (8, 1)", lambda: A.window_progress(_small(), al.Data(data().x, data().y[:, 0]), 2, 2), "(2, 1)", "(2,)"),
    bad("accumulation.window_progress", "5 features into a 4-feature model", lambda: A.window_progress(_small(), data(features=5), 2, 2), "(2, 5)"),
    bad("accumulation.value_names", "model 'x'", lambda: A.value_names("x"), "model", "str"),
    handled("accumulation.value_names", "a scalar model", lambda: A.value_names(al.ScalarModel()), lambda names: len(names) == sum(p.numel() for p in al.ScalarModel().parameters())),
    # last_only.py
    bad("accumulation.last_only_lengths", "model 'x'", lambda: A.last_only_lengths("x", data(), 2), "model", "str"),
    bad("accumulation.last_only_lengths", "data 'x'", lambda: A.last_only_lengths(_small(), "x", 2), "data", "str"),
    bad("accumulation.last_only_lengths", "micro_batch_size=0", lambda: A.last_only_lengths(_small(), data(), 0), "micro_batch_size", "0"),
    bad("accumulation.last_only_lengths", "micro-batches of 3 in 8 samples", lambda: A.last_only_lengths(_small(), data(), 3), "micro_batch_size", "3"),
    bad("accumulation.last_only_lengths", "one micro-batch: no last one to pick", lambda: A.last_only_lengths(_small(), data(), 8), "micro_batch_size", "8"),
    bad("accumulation.last_only_lengths", "nan in y", lambda: A.last_only_lengths(_small(), al.Data(data().x, data().y * NAN), 2), "data.y", "nan"),
    bad("accumulation.last_only_lengths", "a zero full-batch gradient", lambda: A.last_only_lengths(al.ScalarModel(w=2.0), al.Data(torch.ones(4, 1, dtype=torch.float64), 2 * torch.ones(4, 1, dtype=torch.float64)), 2), "zero"),
    handled("accumulation.last_only_lengths", "4 micro-batches of 2", lambda: A.last_only_lengths(_small(), data(), 2), lambda r: r["k"] == 4 and r["mean_square"] >= 1),
    bad("accumulation.last_only_survey", "seeds 'abc'", lambda: A.last_only_survey("abc"), "seeds", "str"),
    bad("accumulation.last_only_survey", "seeds []", lambda: A.last_only_survey([]), "seeds"),
    bad("accumulation.last_only_survey", "seed -1", lambda: A.last_only_survey([-1]), "seeds", "-1"),
    bad("accumulation.last_only_survey", "10**6 seeds", lambda: A.last_only_survey(range(10**6)), "seeds", "1000"),
    bad("accumulation.last_only_survey", "samples=0", lambda: A.last_only_survey([0], samples=0), "samples", "0"),
    bad("accumulation.last_only_survey", "micro_batch_size 5 for 32 samples", lambda: A.last_only_survey([0], micro_batch_size=5), "micro_batch_size", "5"),
    handled("accumulation.last_only_survey", "two seeds", lambda: A.last_only_survey([0, 1]), lambda rows: [r["seed"] for r in rows] == [0, 1]),
    # plots.py
    bad("accumulation.plot_window_progress", "progress {}", lambda: A.plot_window_progress({}), "progress"),
    bad("accumulation.plot_window_progress", "progress 'x'", lambda: A.plot_window_progress("x"), "progress", "str"),
    bad("accumulation.plot_window_progress", "accumulated a list", lambda: A.plot_window_progress({**_progress(), "accumulated": [[1.0]]}), "progress", "accumulated"),
    bad("accumulation.plot_window_progress", "names and values of different lengths", lambda: A.plot_window_progress({**_progress(), "names": ["w"]}), "names"),
    bad("accumulation.plot_window_progress", "title 5", lambda: A.plot_window_progress(_progress(), title=5), "title", "5"),
    bad("accumulation.update_window_progress", "progress {}", lambda: A.update_window_progress(Figure(), {}), "progress"),
    bad("accumulation.update_window_progress", "a figure plot_window_progress did not build", lambda: A.update_window_progress(Figure(), _progress()), "fig", "no artist named"),
    bad("accumulation.update_window_progress", "another model's values", lambda: A.update_window_progress(A.plot_window_progress(_progress()), A.window_progress(al.ScalarModel(), data(features=1), 2, 2)), "progress['names']", "plot_window_progress"),
    bad("accumulation.drawn_window_progress", "fig 'x'", lambda: A.drawn_window_progress("x"), "fig", "str"),
    bad("accumulation.drawn_window_progress", "a figure plot_window_progress did not build", lambda: A.drawn_window_progress(Figure()), "fig", "plot_window_progress"),
    handled("accumulation.drawn_window_progress", "the figure of a progress", lambda: A.drawn_window_progress(A.plot_window_progress(_progress())), lambda d: d["full"].shape == (min(8, len(_progress()["names"])),)),
    # accelerate_idiom.py
    bad("accumulation.accelerate_zero_grad_placements", "model 'x'", lambda: A.accelerate_zero_grad_placements("x", data(), 2, 2), "model", "str"),
    bad("accumulation.accelerate_zero_grad_placements", "data 'x'", lambda: A.accelerate_zero_grad_placements(_small(), "x", 2, 2), "data", "str"),
    bad("accumulation.accelerate_zero_grad_placements", "micro_batch_size=0", lambda: A.accelerate_zero_grad_placements(_small(), data(), 0, 2), "micro_batch_size", "0"),
    bad("accumulation.accelerate_zero_grad_placements", "k=1: nothing accumulates", lambda: A.accelerate_zero_grad_placements(_small(), data(), 2, 1), "k", "1"),
    bad("accumulation.accelerate_zero_grad_placements", "windows of 6 in 8 samples", lambda: A.accelerate_zero_grad_placements(_small(), data(), 3, 2), "6", "8"),
    bad("accumulation.accelerate_zero_grad_placements", "a window larger than the data", lambda: A.accelerate_zero_grad_placements(_small(), data(), 4, 4), "16", "8"),
    bad("accumulation.accelerate_zero_grad_placements", "10**6 micro-batches", lambda: A.accelerate_zero_grad_placements(al.ScalarModel(), al.Data(torch.ones(10**6, 1, dtype=torch.float64), torch.ones(10**6, 1, dtype=torch.float64)), 1, 2), "4096"),
    bad("accumulation.accelerate_zero_grad_placements", "placement 'top'", lambda: A.accelerate_zero_grad_placements(_small(), data(), 2, 2, placements=["top"]), "placements", "'top'"),
    bad("accumulation.accelerate_zero_grad_placements", "placements 'after_step' (a string)", lambda: A.accelerate_zero_grad_placements(_small(), data(), 2, 2, placements="after_step"), "placements", "str"),
    bad("accumulation.accelerate_zero_grad_placements", "loss 'MSE'", lambda: A.accelerate_zero_grad_placements(_small(), data(), 2, 2, loss="MSE"), "loss", "'MSE'"),
    bad("accumulation.accelerate_zero_grad_placements", "nan in x", lambda: A.accelerate_zero_grad_placements(_small(), al.Data(data().x * NAN, data().y), 2, 2), "data.x", "nan"),
    handled("accumulation.accelerate_zero_grad_placements", "two windows, one placement", lambda: A.accelerate_zero_grad_placements(_small(), data(), 2, 2, placements=["after_step"]), lambda r: list(r["runs"]) == ["after_step"] and len(r["runs"]["after_step"]["stepped"]) == 2),
    # explorer.py
    bad("accumulation.accumulation_explorer", "data 'x'", lambda: A.accumulation_explorer(data="x"), "data", "str"),
    bad("accumulation.accumulation_explorer", "model 'x'", lambda: A.accumulation_explorer(model="x"), "model", "str"),
    bad("accumulation.accumulation_explorer", "data of 3 samples", lambda: A.accumulation_explorer(data=al.regression_data(3, 2)), "data", "3"),
    bad("accumulation.accumulation_explorer", "loss 'MSE'", lambda: A.accumulation_explorer(loss="MSE"), "loss", "'MSE'"),
    bad("accumulation.accumulation_explorer", "4 features into the 2-feature default model", lambda: A.accumulation_explorer(data=al.regression_data(32, 4)), "(4, 4)"),
    bad("accumulation.accumulation_explorer", "nan in y", lambda: A.accumulation_explorer(data=al.Data(al.regression_data(32, 2).x, al.regression_data(32, 2).y * NAN)), "data.y", "nan"),
    handled("accumulation.accumulation_explorer", "a tensor-free default", lambda: A.accumulation_explorer(), lambda e: isinstance(e.data["accumulated"], torch.Tensor)),
]
# fmt: on
