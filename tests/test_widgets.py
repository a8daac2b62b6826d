"""Widgets are driven by setting control values; their data is what the plain functions compute."""

import pytest
import torch

import accumlab as al
from accumlab.accumulation.plots import plot_accumulation_progress


def test_accumulation_progress_ends_at_full_batch():
    data = al.regression_data(24, 2, seed=0)
    model = al.mlp(2, 3, 1, depth=1, seed=0)
    p = al.accumulation_progress(model, data, 4, 3)
    assert p["accumulated"].shape == (3, sum(q.numel() for q in model.parameters()))
    assert torch.allclose(p["accumulated"][-1], p["full"], rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="exceeds"):
        al.accumulation_progress(model, data, 5, 5)


def test_explorer_recomputes_when_sliders_move():
    ex = al.accumulation.accumulation_explorer()
    assert ex.data["samples"] == 16
    ex.controls["micro_batch_size"].value = 8
    assert ex.controls["accumulation_steps"].max == 4  # 8 × 4 = 32 samples available
    ex.controls["accumulation_steps"].value = 4
    assert ex.data["samples"] == 32 and ex.data["accumulated"].shape[0] == 4
    assert torch.allclose(ex.data["accumulated"][-1], ex.data["full"], atol=1e-13)


def test_explorer_sliders_cannot_reach_invalid_values():
    ex = al.accumulation.accumulation_explorer()
    mb, k = ex.controls["micro_batch_size"], ex.controls["accumulation_steps"]
    for size in range(mb.min, mb.max + 1):
        mb.value = size
        k.value = k.max
        assert mb.value * k.value <= 32 and k.value >= 1 and ex.error is None


def test_plot_returns_figure_with_lines():
    data = al.regression_data(8, 1)
    p = al.accumulation_progress(al.mlp(1, 2, 1, depth=1), data, 2, 4)
    fig = plot_accumulation_progress(p)
    assert len(fig.axes[0].lines) == 2 * min(len(p["names"]), 8)
