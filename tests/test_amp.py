"""Lesson 06: GradScaler orders, accumulation precision, clipping, schedules, Adam state, widget."""

import ast
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
    # clipping the running .grad never lets the norm past max_norm: the damage is the direction
    assert al.precision.update_norm(r["updates"]["micro_step"]) <= 0.1 * 0.1 * (1 + 1e-9)
    assert r["diffs"]["micro_step"].cosine < 0.99
    assert r["reweighted_gap"] < 1e-12 and r["weights"] == sorted(r["weights"])


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


# ---- predicted GPU failures, reproduced on the CPU -------------------------------------------


def test_infinite_init_scale_is_refused_and_huge_scales_are_reported_as_skips():
    model, data = al.mlp(features=2, hidden=4, depth=1), al.regression_data(n=8, features=2)
    args = {"micro_batch_size": 2, "accumulation_steps": 2}
    with pytest.raises(ValueError, match="init_scale must be a finite"):
        al.precision.amp_train(model, data, init_scale=float("inf"), **args)
    # 1e38 overflows every scaled loss until update() has halved it enough: each of those steps
    # is skipped, and the trace must say so (the old scale-drop test missed inf / 2 == inf)
    t = al.precision.amp_train(model, data, init_scale=1e38, dtype="float16", **args)
    assert t.skipped == [True, True] and t.update_norms == [0.0, 0.0]


def test_amp_report_when_every_window_is_skipped():
    # float16 with a scale no gradient survives: max() of an empty list used to raise here
    res = al.precision.record_results(device="cpu", size="small")
    for r in res["orders"].values():
        r["skipped"] = [True] * len(r["skipped"])
        r["grad_rel_l2_vs_float32"] = [float("nan")] * len(r["skipped"])
    report = al.precision.amp_report(res)
    assert "no window stepped, so no gradient to compare" in report


def test_float16_on_the_cpu_predicts_the_silent_order_overflowing():
    demo = al.precision.amp_demo(dtype="float16", n=64, overflow_micro_steps=(5,))
    ok, silent = demo["traces"]["correct"], demo["traces"]["unscale_update_every_micro_step"]
    assert ok.dtype == silent.dtype == "float16"
    assert ok.skipped == [False, True, False, False]
    assert sum(silent.skipped) > 1  # bfloat16 skipped only the injected window


def test_grad_dtypes_under_autocast_and_in_16_bit_models():
    d = al.precision.grad_dtypes("float16")
    assert d == {
        "autocast output": "float16",
        "autocast, float32 parameters": ["float32"],
        "model.to(float16)": ["float16"],
    }


# ---- scheduler on skipped steps: both conventions, and the real libraries ---------------------


def test_skip_conventions():
    c = al.precision.skip_conventions(windows=6, skipped_windows=(2,), warmup_steps=2)
    assert c["lrs"]["step"] == c["schedule"]
    hold, written = c["lrs"]["hold"], c["schedule"]
    assert hold[:3] == written[:3] and hold[3:] == written[2:-1]
    with pytest.raises(ValueError, match="skipped_windows"):
        al.precision.skip_conventions(windows=4, skipped_windows=(4,))
    with pytest.raises(ValueError, match="scheduler_on_skip"):
        al.precision.amp_train(
            al.mlp(features=2), al.regression_data(n=4, features=2), micro_batch_size=2,
            accumulation_steps=2, scheduler_on_skip="sometimes",
        )  # fmt: skip


def test_accelerate_holds_the_scheduler_on_a_skipped_step():
    acc = al.precision.accelerate_on_skip(skip_step=1, steps=4)
    assert acc["skipped"] == [False, True, False, False]
    assert acc["lrs"] == [
        acc["schedule"][0],
        acc["schedule"][1],
        acc["schedule"][1],
        acc["schedule"][2],
    ]


@pytest.mark.slow
def test_lightning_steps_the_scheduler_on_a_skipped_step(tmp_path):
    # the same measurement as lightning_on_skip, in a fresh process through Lightning's own API
    script = f"""
import torch, lightning as L
from lightning.pytorch.plugins.precision import MixedPrecision
from torch.utils.data import DataLoader, TensorDataset
class M(L.LightningModule):
    def __init__(s):
        super().__init__(); s.w = torch.nn.Parameter(torch.ones(3)); s.seen = []
    def training_step(s, batch, i):
        s.seen.append(s.trainer.optimizers[0].param_groups[0]["lr"])
        return (s.w * batch[0]).sum() * (float("inf") if i == 1 else 1.0)
    def configure_optimizers(s):
        opt = torch.optim.SGD(s.parameters(), lr=1.0)
        lam = lambda k: 1 / (k + 1)
        return {{"optimizer": opt, "lr_scheduler": {{"scheduler": torch.optim.lr_scheduler.LambdaLR(opt, lam), "interval": "step"}}}}
m = M()
scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
t = L.Trainer(accelerator="cpu", plugins=[MixedPrecision("16-mixed", "cpu", scaler=scaler)], max_epochs=1,
              logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
              default_root_dir={str(tmp_path)!r})
t.fit(m, DataLoader(TensorDataset(torch.ones(4, 3)), batch_size=1))
print("LRS", m.seen, "W", float(m.w[0]))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    line = next(x for x in proc.stdout.splitlines() if x.startswith("LRS"))
    lrs = ast.literal_eval(line.split("LRS")[1].split("W")[0].strip())
    w = float(line.split("W")[1])
    assert lrs == [1.0, 1 / 2, 1 / 3, 1 / 4]  # the scheduler stepped after the skipped step 1
    assert w == pytest.approx(1 - 1 - 1 / 3 - 1 / 4)  # step 1 (lr 1/2) moved nothing: skipped


def test_clip_weights():
    assert al.precision.clip_weights([0.5, 0.5], 1.0) == [1.0, 1.0]  # never clipped
    w = al.precision.clip_weights([2.0, 4.0], 1.0)
    assert w[1] == pytest.approx(0.25, rel=1e-5) and w[0] == pytest.approx(0.25 * 0.5, rel=1e-5)
    with pytest.raises(ValueError, match="max_norm"):
        al.precision.clip_weights([1.0], 0)


def test_recorder_in_process_has_its_schema():
    from accumlab import recorded

    res = al.precision.record_results(device="cpu", size="small")
    meta = recorded.machine_meta("amp", "test", "cpu", "small")
    recorded.validate("amp", {"meta": meta, "results": res})
    assert res["device_type"] == "cpu" and res["autocast_dtype"] == "float16"
    assert res["errors"]["correct"] is None and res["errors"]["unscale_every_micro_step"]
    assert "float16" in res["accumulation_errors"]["errors"]


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: al.precision.accumulation_errors([10**9]), "ks"),
        (lambda: al.precision.accumulation_errors("16"), "ks"),
        (lambda: al.precision.micro_batch_grads(10**9), "k"),
        (lambda: al.precision.adam_comparison(4, n=10**9), "n"),
        (lambda: al.precision.adam_comparison(4, epochs=10**9), "epochs"),
        (lambda: al.precision.schedule_curves(4, optimizer_steps=10**9), "optimizer_steps"),
        (lambda: al.precision.skip_conventions(windows=10**9), "windows"),
        (lambda: al.precision.amp_demo(n=10**9), "n"),
    ],
)
def test_huge_sizes_are_refused_before_any_work(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_real_schedulers_stepped_per_micro_batch_climb_back_stop_or_raise():
    r = al.precision.real_schedules(4, optimizer_steps=40, warmup_steps=8, lr=0.1)
    assert set(r["versions"]) == {"torch", "transformers"}
    hf, cos, one, linear = al.precision.REAL_SCHEDULERS
    for name in (hf, cos):
        ok, bad = r["lrs"][name]["optimizer_step"], r["lrs"][name]["micro_step"]
        assert len(ok) == len(bad) == 40 and r["errors"][name]["micro_step"] is None
        assert ok[-1] < 0.002 * 0.1 * 10  # decayed to (almost) zero at the end, as built
        first_low = next(j for j, v in enumerate(bad) if v < 1e-3)
        assert first_low < 40 // 4 + 2  # the decay ran k times faster ...
        assert max(bad[first_low:]) > 0.099  # ... then climbed back to the full lr
    # CosineAnnealingLR(T_max=40) itself: 0.0, 0.05, 0.10 after 40, 60, 80 calls
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=40)
    seen = {}
    for call in range(1, 81):
        opt.step()
        sched.step()
        seen[call] = opt.param_groups[0]["lr"]
    assert seen[40] == pytest.approx(0.0, abs=1e-12)
    assert seen[60] == pytest.approx(0.05) and seen[80] == pytest.approx(0.1)
    # OneCycleLR refuses a 41st call: the loop stops in window 10
    assert len(r["lrs"][one]["micro_step"]) == 10
    assert "total steps is 40" in r["errors"][one]["micro_step"]
    assert r["errors"][one]["optimizer_step"] is None
    # linear decay (the Trainer's default) does just end early: 0 from window 10 to the end
    ok, bad = r["lrs"][linear]["optimizer_step"], r["lrs"][linear]["micro_step"]
    assert len(bad) == 40 and r["errors"][linear]["micro_step"] is None
    assert bad[40 // 4 - 1] > 0 and max(bad[40 // 4 :]) == 0.0 and ok[-1] > 0
    assert type(al.precision.plot_real_schedules(r)).__name__ == "Figure"


def test_heavy_clipping_tends_to_the_last_micro_batch_direction():
    s = al.precision.clipping_seeds(seeds=[0, 1, 2, 3], ratios=[0.001, 0.8, 2.0])
    for last, (heavy, mild, none) in zip(s["last_cosine"], s["cosine"], strict=True):
        assert abs(heavy - last) < 0.02  # the bend is cos(g_last, g), not a function of max_norm
        assert mild > 0.99
        assert none == pytest.approx(1.0, abs=1e-12)  # nothing clipped at all: the same update
    assert min(s["last_cosine"]) < 0.3 < 0.8 < max(s["last_cosine"])  # it varies with the seed


@pytest.mark.slow
def test_lightning_on_skip_measures_the_real_trainer():
    r = al.precision.lightning_on_skip(skip_step=1, steps=4)
    assert r["skipped"] == [False, True, False, False] and r["finite"]
    assert r["lrs"] == r["schedule"]  # stepped on the skipped step too


@pytest.mark.slow
def test_lightning_frequency_counts_batches():
    assert al.precision.lightning_frequency(4, 2, 16)["scheduler_steps"] == 4
    assert al.precision.lightning_frequency(4, 8, 16)["scheduler_steps"] == 2


def test_float16_skips_over_seeds():
    r = al.precision.float16_skips(seeds=[0, 1])
    assert all(c[1] and s[1] for c, s in zip(r["correct"], r["silent"], strict=True))
    assert all(s[0] for s in r["silent"])  # update() mid-window overflows window 0


def test_06_3_clipping_is_active_in_every_window_of_its_first_run():
    # the 06.3 checker reads "clipped" from the step's gradient norm: that needs every window's
    # unclipped norm above the threshold of its first run
    from accumlab.exercises.lesson06 import _train_setup

    model, batches, sched = _train_setup()
    data = al.Data(torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches]))
    t = al.precision.amp_train(
        model, data, micro_batch_size=2, accumulation_steps=4, max_norm=0.05, scheduler=sched
    )
    assert min(t.clip_norms) > 10 * 0.05


def test_optimizer_step_instead_of_scaler_step_puts_the_overflow_into_the_weights():
    model = al.mlp(features=4, hidden=16, depth=2, dtype=torch.float32)
    data = al.regression_data(n=32, features=4, dtype=torch.float32)
    kw = dict(micro_batch_size=4, accumulation_steps=4, overflow_micro_steps=(5,))
    bad = al.precision.amp_train(model, data, order="optimizer_step_not_scaler_step", **kw)
    good = al.precision.amp_train(model, data, **kw)
    finite = [all(bool(torch.isfinite(v).all()) for v in p.values()) for p in bad.params]
    assert bad.skipped == [False, False] and finite == [True, False]
    assert good.skipped == [False, True]
    assert all(bool(torch.isfinite(v).all()) for v in good.params[-1].values())


def test_a_fused_optimizer_skips_and_unscales_inside_its_kernel():
    r = al.precision.fused_with_scaler()  # n = 64: four windows, window 1 skipped, not the last
    assert r["supports_amp_scaling"] == {"fused": True, "default": False}
    scale = al.precision.default_loss_scale()
    for name, run in r["runs"].items():
        assert run["update_norms"][1] == 0.0 and min(run["update_norms"][2:]) > 0, name
        assert run["adam_steps"] == 3, name  # the skipped window does not advance Adam's count
        fused = run["supports_amp_scaling"]
        assert run["step_calls"] == (4 if fused else 3), name  # a fused step() is always called
        assert run["found_inf"] == ([0.0, 1.0, 0.0, 0.0] if fused else [None] * 3), name
    kernel = r["runs"]["fused, scaler.step unscales"]
    assert kernel["grad_scale"][0] == scale and kernel["grad_ratio"][0] == scale  # divided .grad
    assert r["runs"]["fused"]["grad_scale"] == [None] * 4  # unscale_ ran: nothing left to divide
    assert max(r["param_gaps"].values()) < 1e-6


def test_a_skipped_fused_step_that_advanced_adam_would_be_seen(monkeypatch):
    # the mutation: a fused step whose found_inf is set still counts a step (as a kernel that
    # skipped only the weights would); fused_with_scaler must show it
    init = torch.optim.Adam.__init__

    def mutated(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if self.defaults.get("fused"):

            def count_anyway(opt, args, kwargs):
                if getattr(opt, "found_inf", None) is not None and float(opt.found_inf):
                    for state in opt.state.values():
                        state["step"] += 1

            self.register_step_post_hook(count_anyway)

    monkeypatch.setattr(torch.optim.Adam, "__init__", mutated)
    r = al.precision.fused_with_scaler()
    assert r["runs"]["fused"]["adam_steps"] == 4 and r["param_gaps"]["unscale_ + clip"] > 1e-6


def test_accelerate_sees_no_skip_with_a_fused_optimizer():
    plain = al.precision.accelerate_on_skip(skip_step=1, steps=4)
    fused = al.precision.accelerate_on_skip(skip_step=1, steps=4, fused=True)
    assert plain["moved"] == fused["moved"] == [True, False, True, True]  # both kernels skip
    assert plain["skipped"] == [False, True, False, False]
    assert fused["skipped"] == [False] * 4 and fused["lrs"] == fused["schedule"]  # not held


def test_the_trainer_holds_unless_skipped_and_its_default_optimizer_is_fused():
    t = al.precision.trainer_skip_check()
    assert t["holds_unless_skipped"] and t["default_is_fused"] == ("fused" in t["default_optim"])


@pytest.mark.slow
def test_float16_skip_counts_over_32_seeds_are_the_recorded_ones():
    r = al.precision.float16_skips(seeds=range(32))
    assert al.precision.float16_skip_counts(r) == al.precision.FLOAT16_SEED_SWEEP
    assert [s for s, t in zip(r["seeds"], r["silent"], strict=True) if not t[0]] == [30]
