"""Lesson 06: GradScaler orders, accumulation precision, clipping, schedules, Adam state, widget."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import accumlab as al

ROOT = Path(__file__).resolve().parents[1]


# ---- GradScaler with accumulation ----------------------------------------------------------


def test_cpu_grad_scaler_is_supported_here():
    assert al.precision.cpu_grad_scaler_supported()
    assert al.precision.autocast_dtype("cpu") == torch.bfloat16
    assert al.precision.autocast_dtype("cuda") == torch.float16


def test_wrong_orders_raise_and_right_ones_do_not():
    assert al.precision.amp_error("correct") is None
    assert al.precision.amp_error("unscale_update_every_micro_step") is None
    assert "unscale_() has already been called" in al.precision.amp_error(
        "unscale_every_micro_step"
    )
    assert "No inf checks" in al.precision.amp_error("update_every_micro_step")


def test_single_micro_step_windows_do_not_trip_the_unscale_check():
    # k = 1: unscale_ once per window is also once per micro-step
    assert al.precision.amp_error("unscale_every_micro_step", accumulation_steps=1) is None


@pytest.fixture(scope="module")
def demo():
    return al.precision.amp_demo(n=64, overflow_micro_steps=(5,))


def test_correct_order_keeps_scale_constant_and_skips_whole_window(demo):
    t = demo["traces"]["correct"]
    assert t.scale_changes_inside_windows == 0
    assert t.skipped == [False, True, False, False] == demo["reference"].skipped
    assert t.update_norms[1] == 0.0
    assert t.window_scales[1] == t.window_scales[0] / 2  # backoff after the overflow
    assert al.precision.max_param_gap(t.params[1], t.params[0]) == 0.0  # nothing moved
    errors = [e for e in demo["grad_errors"]["correct"] if not math.isnan(e)]
    assert max(errors) < 0.05  # bfloat16 rounding only


def test_update_every_micro_step_changes_scale_and_corrupts_gradients(demo):
    t = demo["traces"]["unscale_update_every_micro_step"]
    assert t.scale_changes_inside_windows > 0
    errors = [
        e for e in demo["grad_errors"]["unscale_update_every_micro_step"] if not math.isnan(e)
    ]
    assert min(errors) > 0.5
    ref = demo["reference"].update_norms
    assert all(u < 1e-3 * r for u, r in zip(t.update_norms, ref, strict=True) if r > 0)


def test_amp_train_disabled_is_plain_float32_accumulation():
    model = al.mlp(features=4, hidden=8, depth=1, dtype=torch.float32)
    data = al.regression_data(n=16, features=4, dtype=torch.float32)
    amp = al.precision.amp_train(
        model, data, micro_batch_size=4, accumulation_steps=2, enabled=False
    )
    ref = al.run(al.Recipe(4, 2), model, data, lr=0.1)
    assert al.precision.max_param_gap(amp.params[-1], ref.params[-1]) < 1e-6


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"order": "sometimes"}, "order"),
        ({"micro_batch_size": 0}, "micro_batch_size"),
        ({"accumulation_steps": 3}, "len\\(data\\)"),
        ({"max_norm": -1.0}, "max_norm"),
        ({"init_scale": 0}, "init_scale"),
    ],
)
def test_amp_train_bad_input(kwargs, name):
    model = al.mlp(features=2, hidden=4, depth=1)
    data = al.regression_data(n=8, features=2)
    args = {"micro_batch_size": 2, "accumulation_steps": 2, **kwargs}
    with pytest.raises(ValueError, match=name):
        al.precision.amp_train(model, data, **args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_without_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="CUDA"):
        al.precision.amp_train(
            al.mlp(features=2), al.regression_data(n=4, features=2), micro_batch_size=2,
            accumulation_steps=2, device="cuda",
        )  # fmt: skip


# ---- precision of accumulation ---------------------------------------------------------------


def test_low_precision_error_grows_with_k_and_float32_buffers_do_not():
    sweep = al.precision.accumulation_errors([1, 16, 256])
    e = sweep["errors"]
    assert e["bfloat16"][-1] > 5 * e["bfloat16"][0]
    assert e["float16"][-1] > 5 * e["float16"][0]
    assert all(f < 1e-5 for f in e["float32"])
    assert all(h < b for h, b in zip(e["float16"], e["bfloat16"], strict=True))
    mixed = e["bfloat16 grads, float32 buffer"]
    assert mixed[-1] <= mixed[0] and mixed[-1] < e["bfloat16"][-1] / 10


def test_accumulate_is_exact_in_float64_terms_for_float32_at_k1():
    g = al.precision.micro_batch_grads(1)
    assert torch.allclose(al.precision.accumulate(g, "float32"), g[0], rtol=1e-6)


def test_precision_bad_input():
    with pytest.raises(ValueError, match="accumulation"):
        al.precision.accumulate(torch.zeros(2, 3), "float8")
    with pytest.raises(ValueError, match="ks"):
        al.precision.accumulation_errors([])
    with pytest.raises(ValueError, match="ks"):
        al.precision.accumulation_errors([0])


# ---- clipping, schedules, optimizer state ----------------------------------------------------


def test_clipped_updates_window_matches_full_batch_micro_step_does_not():
    model = al.mlp(features=4, hidden=8, depth=1)
    data = al.regression_data(n=16, features=4)
    r = al.precision.clipped_updates(model, data, micro_batch_size=4, max_norm=0.1, lr=0.1)
    assert r["full_norm"] > 0.1
    assert r["diffs"]["window"].max_abs < 1e-12
    assert r["diffs"]["micro_step"].rel_l2 > 0.1
    assert al.precision.update_norm(r["updates"]["window"]) == pytest.approx(0.1 * 0.1)
    assert al.precision.update_norm(r["updates"]["micro_step"]) > 0.1 * 0.1


def test_clipped_updates_bad_input():
    model, data = al.mlp(features=4), al.regression_data(n=16, features=4)
    with pytest.raises(ValueError, match="max_norm"):
        al.precision.clipped_updates(model, data, micro_batch_size=4, max_norm=0)
    with pytest.raises(ValueError, match="micro_batch_size"):
        al.precision.clipped_updates(model, data, micro_batch_size=5, max_norm=1.0)


def test_schedule_runs_k_times_faster_per_micro_batch():
    for k in (2, 4):
        c = al.precision.schedule_curves(k, optimizer_steps=24, warmup_steps=8)
        assert c["warmup_end"]["optimizer_step"] == 7
        assert c["warmup_end"]["micro_step"] == 8 // k - 1
        ok, bad = c["lrs"]["optimizer_step"], c["lrs"]["micro_step"]
        for j in range(24 // k):  # step j of the buggy loop uses the lr of step (j + 1)·k − 1
            assert bad[j] == pytest.approx(ok[(j + 1) * k - 1])


def test_warmup_cosine_validation():
    with pytest.raises(ValueError, match="total_steps"):
        al.precision.warmup_cosine(8, 8)
    with pytest.raises(ValueError, match="warmup_steps"):
        al.precision.warmup_cosine(0, 8)
    with pytest.raises(ValueError, match="min_ratio"):
        al.precision.warmup_cosine(2, 8, min_ratio=2.0)


def test_adam_accumulated_equals_full_batch_small_steps_do_not():
    r = al.precision.adam_comparison(4, epochs=3)
    assert r["diffs"]["accumulated"].max_abs < 1e-12
    assert r["diffs"]["small_steps"].rel_l2 > 0.1
    assert r["adam_steps"] == {"full": 3, "accumulated": 3, "small_steps": 12}
    assert r["adam_steps"] == r["optimizer_steps"]
    with pytest.raises(ValueError, match="accumulation_steps"):
        al.precision.adam_comparison(3)


# ---- plots and widget ------------------------------------------------------------------------


def test_plots_return_figures(demo):
    from matplotlib.figure import Figure

    assert isinstance(al.precision.plot_scales(demo["traces"]), Figure)
    assert isinstance(
        al.precision.plot_precision(al.precision.accumulation_errors([1, 2]), mark_k=2), Figure
    )
    assert isinstance(
        al.precision.plot_schedules(al.precision.schedule_curves(2, optimizer_steps=10)), Figure
    )
    assert isinstance(al.precision.plot_update_norms(["a", "b"], [1.0, 2.0], limit=1.5), Figure)


def test_explorer_data_matches_full_batch_only_when_placed_right():
    assert al.precision.explorer_data(k=4)["param_gap"] < 1e-12
    assert al.precision.explorer_data(k=4, clip_at="none")["param_gap"] < 1e-12
    assert al.precision.explorer_data(k=4, clip_at="micro_step", max_norm=0.1)["param_gap"] > 1e-4
    bad = al.precision.explorer_data(k=4, scheduler_step="micro_step")
    assert bad["param_gap"] > 1e-4 and bad["lrs"] != bad["reference_lrs"]
    with pytest.raises(ValueError, match="k"):
        al.precision.explorer_data(k=99)
    with pytest.raises(ValueError, match="precision"):
        al.precision.explorer_data(precision="float8")


def test_explorer_widget_follows_its_controls():
    e = al.precision.amp_explorer()
    assert e.data["k"] == 4
    e.controls["k"].value = 2
    assert e.data["k"] == 2 and len(e.data["update_norms"]) == 8
    e.controls["scheduler_step"].value = "micro_step"
    assert e.data["lrs"] != e.data["reference_lrs"]
    e.controls["clip_at"].value = "none"
    assert e.data["max_norm"] is None
    assert e.controls["max_norm"].min > 0 and e.controls["k"].max == 8


# ---- the GPU recorder, exercised on CPU ------------------------------------------------------


@pytest.mark.slow
def test_recorder_runs_on_cpu(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "accumlab.record", "amp", "--allow-cpu", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "amp.json").read_text())
    res = record["results"]
    assert record["meta"]["command"].startswith("python -m accumlab.record amp")
    assert res["device_type"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert res["orders"]["correct"]["scale_changes_inside_windows"] == 0
    assert res["orders"]["correct"]["skipped"] == res["reference_skipped"]
    assert res["errors"]["correct"] is None and res["errors"]["unscale_every_micro_step"]
    assert "float16" in res["accumulation_errors"]["errors"]
    assert "Recorded on" in al.describe_recorded(record)
    report = al.precision.amp_report(res)
    assert "unscale_() has already been called" in report and "float16" in report
