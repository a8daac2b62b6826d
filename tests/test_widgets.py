"""Widgets are driven by setting control values; their data is what the plain functions compute."""

import pytest
import torch

import accumlab as al


def test_accumulation_progress_ends_at_full_batch():
    data = al.regression_data(24, 2, seed=0)
    model = al.mlp(2, 3, 1, depth=1, seed=0)
    p = al.accumulation_progress(model, data, 4, 3)
    assert p["accumulated"].shape == (3, sum(q.numel() for q in model.parameters()))
    assert torch.allclose(p["accumulated"][-1], p["full"], rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="exceeds"):
        al.accumulation_progress(model, data, 5, 5)


def test_window_progress_shows_each_bug():
    data = al.regression_data(24, 2, seed=0)
    model = al.mlp(2, 3, 1, depth=1, seed=0)
    right = al.accumulation.window_progress(model, data, 4, 3)
    assert torch.allclose(right["accumulated"][-1], right["full"], rtol=0, atol=1e-13)
    assert right["diff"].max_rel <= 1e-12
    # zero_grad at the top of every iteration: the optimizer sees the last micro-batch ÷ k
    top = al.accumulation.window_progress(model, data, 4, 3, zero_grad="every_micro_step")
    last = al.full_batch_grads(model, data[8:12])
    flat_last = torch.cat([last[n].reshape(-1) for n, _ in model.named_parameters()])
    assert torch.allclose(top["accumulated"][-1], flat_last / 3, rtol=0, atol=1e-13)
    assert top["diff"].max_rel > 0.1
    # forgetting loss / k: k times the full-batch gradient
    undivided = al.accumulation.window_progress(model, data, 4, 3, divide_by_k=False)
    assert torch.allclose(undivided["accumulated"][-1], 3 * right["full"], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="zero_grad"):
        al.accumulation.window_progress(model, data, 4, 3, zero_grad="sometimes")
    with pytest.raises(ValueError, match="divide_by_k"):
        al.accumulation.window_progress(model, data, 4, 3, divide_by_k="yes")


def test_last_only_lengths_are_the_buggy_loops_step():
    data = al.regression_data(n=24, features=3, seed=4)
    model = al.mlp(features=3, hidden=8, depth=1, seed=4)
    full = al.flatten(al.full_batch_grads(model, data))
    lengths = al.accumulation.last_only_lengths(model, data, 8)
    assert lengths["k"] == 3 and len(lengths["ratios"]) == 3
    # the loop that zeroes every iteration steps with the last micro-batch ÷ k: its length is ratio[-1]
    buggy = al.flatten(al.accumulated_grads(model, data, 8, zero_grad="every_micro_step"))
    assert abs(float(buggy.norm() / full.norm()) - lengths["ratios"][-1]) <= 1e-12
    assert (
        abs(
            float(torch.nn.functional.cosine_similarity(buggy, full, dim=0))
            - lengths["cosines"][-1]
        )
        <= 1e-12
    )
    # mean square = 1 + spread, and both computed independently of each other here
    parts = [al.flatten(al.full_batch_grads(model, mb)) for mb in data.micro_batches(8)]
    mean_square = sum(float(g.dot(g)) for g in parts) / 3 / float(full.dot(full))
    assert abs(lengths["mean_square"] - mean_square) <= 1e-12
    assert abs(lengths["mean_square"] - 1 - lengths["spread"]) <= 1e-12 and lengths["spread"] > 0
    survey = al.accumulation.last_only_survey([4, 5], samples=24)
    assert survey[0]["ratios"] == lengths["ratios"] and survey[1]["ratios"] != lengths["ratios"]


def test_explorer_recomputes_when_controls_move():
    ex = al.accumulation.accumulation_explorer()
    assert ex.data["samples"] == 16
    ex.controls["micro_batch_size"].value = 8
    assert ex.controls["accumulation_steps"].max == 4  # 8 × 4 = 32 samples available
    ex.controls["accumulation_steps"].value = 4
    assert ex.data["samples"] == 32 and ex.data["accumulated"].shape[0] == 4
    assert torch.allclose(ex.data["accumulated"][-1], ex.data["full"], atol=1e-13)
    ex.controls["zero_grad"].value = "every_micro_step"
    assert ex.data["zero_grad"] == "every_micro_step" and ex.data["diff"].max_rel > 0.1
    ex.controls["zero_grad"].value = "window"
    ex.controls["divide_by_k"].value = False
    assert torch.allclose(ex.data["accumulated"][-1], 4 * ex.data["full"], atol=1e-12)


def test_explorer_updates_one_figure_with_what_window_progress_computes():
    model = al.mlp(features=2, hidden=3, depth=1, seed=0)
    data = al.regression_data(n=32, features=2, seed=0)
    ex = al.accumulation.accumulation_explorer(model, data)
    first, line = ex.figure, ex.figure.axes[0].lines[0]
    ex.controls["micro_batch_size"].value = 2
    ex.controls["accumulation_steps"].value = 8
    ex.controls["zero_grad"].value = "every_micro_step"
    assert ex.error is None and ex.figure is first and first.axes[0].lines[0] is line  # moved
    plain = al.accumulation.window_progress(model, data, 2, 8, zero_grad="every_micro_step")
    assert torch.equal(ex.data["accumulated"], plain["accumulated"])
    assert torch.equal(ex.data["full"], plain["full"]) and ex.data["diff"] == plain["diff"]
    assert list(line.get_xdata()) == list(range(1, 9))
    assert list(line.get_ydata()) == plain["accumulated"][:, 0].tolist()
    assert first.axes[0].get_title().startswith("zero every micro-batch, loss ÷ k")
    assert bytes(ex.image.value[:4]) == b"\x89PNG"


def test_window_progress_update_keeps_a_title_the_caller_gave():
    model, data = al.mlp(1, 2, 1, depth=1, seed=0), al.regression_data(8, 1, seed=0)
    fig = al.accumulation.plot_window_progress(
        al.accumulation.window_progress(model, data, 2, 4), title="mine"
    )
    later = al.accumulation.window_progress(model, data, 4, 2, divide_by_k=False)
    al.accumulation.update_window_progress(fig, later)
    assert fig.axes[0].get_title() == "mine"
    assert list(fig.axes[0].lines[0].get_ydata()) == later["accumulated"][:, 0].tolist()


def test_explorer_sliders_cannot_reach_invalid_values():
    ex = al.accumulation.accumulation_explorer()
    mb, k = ex.controls["micro_batch_size"], ex.controls["accumulation_steps"]
    for size in range(mb.min, mb.max + 1):
        mb.value = size
        k.value = k.max
        assert mb.value * k.value <= 32 and k.value >= 1 and ex.error is None


def test_plot_returns_figure_with_lines():
    data = al.regression_data(8, 1)
    p = al.accumulation.window_progress(al.mlp(1, 2, 1, depth=1), data, 2, 4)
    fig = al.accumulation.plot_window_progress(p)
    assert len(fig.axes[0].lines) == 2 * min(len(p["names"]), 8)


def test_graph_growth_explorer_keeps_one_figure():
    ex = al.autograd.graph_growth_explorer()
    first = ex.figure
    ex.controls["m"].value = 4
    assert ex.figure is first and [r["n"] for r in ex.data] == [4, 8, 12, 16]
    last = ex.data[-1]
    assert (
        last["summed_saved_bytes"] == last["batched_saved_bytes"] == 4 * last["logged_saved_bytes"]
    )
    assert "in micro-batches of 4" in ex.summary.value  # the caption follows the control
    ex.controls["saves"].value = "+ weight_norm weights"
    last = ex.data[-1]
    assert ex.figure is first and last["summed_saved_bytes"] > last["batched_saved_bytes"]


def test_graph_growth_measures_the_real_loops():
    model = al.mlp(features=4, hidden=16, depth=2, seed=0)
    data = al.regression_data(n=12, features=4, seed=0)
    rows = al.autograd.graph_growth(model, data, 6)
    one = rows[0]["accumulated_saved_bytes"]
    ops = rows[0]["accumulated_nodes"] - len(list(model.parameters()))
    for r in rows:
        # a backward per sample frees every graph's saved tensors, with or without the logging
        assert r["accumulated_saved_bytes"] == r["logged_saved_bytes"] == one > 0
        # ...but total += loss keeps every graph's nodes: the summed graph's, n copies of each op
        assert r["logged_nodes"] == r["summed_nodes"] == 6 + r["n"] * ops + r["n"] - 1
        assert r["accumulated_nodes"] == r["batched_nodes"] == 6 + ops
    assert all(p.grad is None for p in model.parameters())  # the loops ran on a copy


def test_graph_growth_explorer_measures_each_setting_once(monkeypatch):
    from accumlab.autograd import summed

    passes = []
    measure = summed.graph_growth
    monkeypatch.setattr(
        summed,
        "graph_growth",
        lambda *a, **k: passes.append((k["micro_batch"], k["autocast"])) or measure(*a, **k),
    )
    model = al.mlp(features=4, hidden=16, depth=2, seed=0)
    data = al.regression_data(n=10, features=4, seed=0)
    ex = al.autograd.graph_growth_explorer(model, data)
    fig, line = ex.figure, ex.figure.axes[0].lines[0]
    for m in (4, 1, 8, 4):
        ex.controls["m"].value = m
    assert passes == [(1, False), (4, False), (8, False)]  # a setting seen before is a lookup
    assert ex.error is None and ex.figure is fig and fig.axes[0].lines[0] is line  # moved
    # 10 samples in micro-batches of 4: the explorer runs the 8 that fill two
    assert ex.data == al.autograd.graph_growth(model, data, 8, micro_batch=4)
    assert list(line.get_xdata()) == [4, 8]
    assert list(line.get_ydata()) == [r["summed_nodes"] for r in ex.data]
    ex.controls["saves"].value = "+ bf16 autocast copies"
    assert passes[-1] == (4, True) and ex.error is None
