"""Lesson 05's explorer and figures, driven without a browser."""

import pytest

import accumlab as al
from accumlab.figures import figure_png
from accumlab.memory import plots as plots_memory


def test_explore_memory_compute():
    d = al.memory.explore_memory(
        micro_batch_size=4,
        accumulation_steps=2,
        width=32,
        depth=2,
        optimizer="sgd",
        checkpointing=False,
    )
    assert d["global_batch"] == 8
    assert d["full_batch"]["activations"] == 2 * d["footprint"]["activations"]
    assert d["footprint"]["optimizer_state"] == 0
    assert d["footprint"]["accumulation_steps"] == 2 and d["full_batch"]["accumulation_steps"] == 1
    assert d["seconds"] > 0 and d["full_seconds"] > 0
    # the bars are medians of a few timings, drawn with their range
    for key in ("seconds", "full_seconds"):
        low, high = d[f"{key}_range"]
        assert low <= d[key] <= high
    with pytest.raises(ValueError, match="optimizer"):
        al.memory.explore_memory(optimizer="lbfgs")


def test_explorer_reacts_to_controls():
    ex = al.memory.memory_explorer()
    assert ex.data["accumulation_steps"] == 8
    # the first view shows what accumulation saves: the full batch's estimate is several times more
    from accumlab.memory.peaks import Footprint

    mine, whole = (Footprint(**ex.data[key]) for key in ("footprint", "full_batch"))
    assert whole.estimate > 3 * mine.estimate
    ex.controls["accumulation_steps"].value = 2
    assert ex.data["global_batch"] == 2 * ex.data["micro_batch_size"]
    plain = ex.data["footprint"]["activations"]
    ex.controls["depth"].value = 5
    deeper = ex.data["footprint"]["activations"]
    ex.controls["checkpointing"].value = True
    assert deeper > plain and ex.data["footprint"]["activations"] < deeper
    ex.controls["optimizer"].value = "sgd_momentum"
    f = ex.data["footprint"]
    assert f["optimizer_state"] == f["params"]
    assert ex.error is None
    # no invalid value is reachable: the sliders offer fixed lists / ranges
    assert (
        min(ex.controls["micro_batch_size"].options) >= 1
        and ex.controls["accumulation_steps"].min == 1
    )


def test_figures_render_as_png():
    model, data = al.memory.memory_setup(width=8, depth=2, global_batch=8)
    f = al.memory.footprint(model, data, 4)
    figs = [
        al.memory.plot_footprint({"a": f, "b": f.as_dict()}),
        al.memory.plot_memory_vs_k(al.memory.memory_sweep(model, data, [8, 4])),
        al.memory.plot_logging_growth({"x": al.memory.logging_growth(model, data, 4)}),
        al.memory.plot_memory_explorer(al.memory.explore_memory(2, 2, 32, 1, "adam", True)),
    ]
    for fig in figs:
        assert figure_png(fig).startswith(b"\x89PNG")


def test_byte_unit():
    assert plots_memory.byte_unit(10) == (1.0, "B")
    assert plots_memory.byte_unit(3 * 2**20) == (2.0**20, "MiB")


def test_explore_memory_refuses_sizes_the_machine_cannot_hold():
    with pytest.raises(ValueError, match="more than half"):
        al.memory.explore_memory(micro_batch_size=8, accumulation_steps=10**9)
