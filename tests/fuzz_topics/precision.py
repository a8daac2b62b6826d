"""Lesson 06 (al.precision): bad inputs and what each must do."""

from __future__ import annotations

import torch
from fuzz_harness import bad, handled
from matplotlib.figure import Figure

import accumlab as al

from . import INF, NAN, data

P = al.precision


def _amp(**kw):
    kw = {"micro_batch_size": 2, "accumulation_steps": 2, **kw}
    return P.amp_train(al.mlp(dtype=torch.float32), data().to(torch.float32), **kw)


# fmt: off
CASES = [
    bad("precision.accelerate_on_skip", "skip_step=10 of 4 steps", lambda: P.accelerate_on_skip(10), "skip_step", "10"),
    bad("precision.accelerate_on_skip", "steps=0", lambda: P.accelerate_on_skip(0, 0), "steps", "0"),
    bad("precision.accumulate", "accumulation 'fp16'", lambda: P.accumulate(torch.ones(4, 3), "fp16"), "accumulation", "'fp16'"),
    bad("precision.accumulate", "device 'tpu'", lambda: P.accumulate(torch.ones(4, 3), "float32", device="tpu"), "device", "'tpu'"),
    bad("precision.accumulate", "device 'cuda' on a CPU machine", lambda: P.accumulate(torch.ones(4, 3), "float32", device="cuda"), "no CUDA device"),
    bad("precision.accumulate", "contributions a list", lambda: P.accumulate([[1.0, 2.0]], "float32"), "contributions", "list"),
    bad("precision.accumulate", "contributions 1-d", lambda: P.accumulate(torch.ones(4), "float32"), "contributions", "(4,)"),
    bad("precision.accumulate", "zero contributions", lambda: P.accumulate(torch.ones(0, 3), "float32"), "contributions", "0"),
    bad("precision.accumulation_errors", "ks=[10**9]", lambda: P.accumulation_errors([10**9]), "ks"),
    bad("precision.accumulation_errors", "ks='48'", lambda: P.accumulation_errors("48"), "ks", "str"),
    bad("precision.accumulation_errors", "accumulations ('fp16',)", lambda: P.accumulation_errors([2], ("fp16",)), "accumulation", "'fp16'"),
    bad("precision.accumulation_errors", "accumulations 'float32'", lambda: P.accumulation_errors([2], "float32"), "accumulations", "str"),
    bad("precision.accumulation_errors", "seed=-1", lambda: P.accumulation_errors([2], seed=-1), "seed", "-1"),
    bad("precision.adam_comparison", "accumulation_steps=10**9", lambda: P.adam_comparison(10**9), "accumulation_steps"),
    bad("precision.adam_comparison", "optimizer 'Adam'", lambda: P.adam_comparison(optimizer="Adam"), "optimizer", "'adam'"),
    bad("precision.adam_comparison", "lr=nan", lambda: P.adam_comparison(lr=NAN), "lr", "nan"),
    bad("precision.adam_comparison", "optimizer 'sgd' has no step count", lambda: P.adam_comparison(optimizer="sgd"), "optimizer", "'sgd'"),
    bad("precision.adam_steps", "trace 'x'", lambda: P.adam_steps("x"), "trace", "str"),
    bad("precision.amp_demo", "orders 'correct'", lambda: P.amp_demo("correct"), "orders", "str"),
    bad("precision.amp_demo", "n=10**9", lambda: P.amp_demo(n=10**9), "n"),
    bad("precision.amp_demo", "n=30, not whole windows (named n, not len(data))", lambda: P.amp_demo(n=30), "n=30", "16"),
    bad("precision.amp_demo", "device 'cuda' on a CPU machine", lambda: P.amp_demo(device="cuda"), "no CUDA device"),
    bad("precision.amp_demo", "micro_batch_size=0", lambda: P.amp_demo(micro_batch_size=0), "micro_batch_size", "0"),
    bad("precision.amp_demo", "overflow_micro_steps 5", lambda: P.amp_demo(overflow_micro_steps=5), "overflow_micro_steps", "5"),
    bad("precision.amp_error", "order 'Correct'", lambda: P.amp_error("Correct"), "'correct'"),
    bad("precision.amp_error", "micro_batch_size=0", lambda: P.amp_error("correct", micro_batch_size=0), "micro_batch_size", "0"),
    bad("precision.amp_report", "results {}", lambda: P.amp_report({}), "results"),
    bad("precision.amp_train", "init_scale=inf (every step skipped, inf / 2 = inf)", lambda: _amp(init_scale=INF), "init_scale", "inf"),
    bad("precision.amp_train", "device 'cuda' on a CPU machine", lambda: _amp(device="cuda"), "no CUDA device"),
    bad("precision.amp_train", "order 'Correct'", lambda: _amp(order="Correct"), "'correct'"),
    bad("precision.amp_train", "lr=nan", lambda: _amp(lr=NAN), "lr"),
    bad("precision.amp_train", "model 'x'", lambda: P.amp_train("x", data(), micro_batch_size=2, accumulation_steps=2), "model", "str"),
    bad("precision.amp_train", "data 'x'", lambda: P.amp_train(al.mlp(), "x", micro_batch_size=2, accumulation_steps=2), "data", "str"),
    bad("precision.amp_train", "nan in x", lambda: P.amp_train(al.mlp(), al.Data(torch.full((8, 4), NAN), data().y), micro_batch_size=2, accumulation_steps=2), "data.x", "nan"),
    bad("precision.amp_train", "enabled 'no'", lambda: _amp(enabled="no"), "enabled", "'no'"),
    bad("precision.amp_train", "overflow_micro_steps 5", lambda: _amp(overflow_micro_steps=5), "overflow_micro_steps", "5"),
    bad("precision.amp_train", "scheduler 5", lambda: _amp(scheduler=5), "scheduler", "int"),
    bad("precision.amp_train", "y (8,) against an output (8, 1)", lambda: P.amp_train(al.mlp(), al.Data(data().x, data().y[:, 0]), micro_batch_size=2, accumulation_steps=2), "(2, 1)", "(2,)"),
    bad("precision.autocast_dtype", "'tpu'", lambda: P.autocast_dtype("tpu"), "device", "'tpu'"),
    bad("precision.clip_weights", "norms 'abc'", lambda: P.clip_weights("abc", 1.0), "norms", "str"),
    bad("precision.clip_weights", "norms [nan]", lambda: P.clip_weights([NAN], 1.0), "norms", "nan"),
    bad("precision.clip_weights", "max_norm=nan", lambda: P.clip_weights([1.0], NAN), "max_norm", "nan"),
    bad("precision.clipping_sweep", "ratios []", lambda: P.clipping_sweep(al.mlp(), data(), micro_batch_size=2, ratios=[]), "ratios"),
    bad("precision.clipping_sweep", "ratios [0.0]", lambda: P.clipping_sweep(al.mlp(), data(), micro_batch_size=2, ratios=[0.0]), "ratios", "0.0"),
    bad("precision.clipping_sweep", "ratios [nan]", lambda: P.clipping_sweep(al.mlp(), data(), micro_batch_size=2, ratios=[NAN]), "ratios", "nan"),
    bad("precision.clipping_sweep", "micro_batch_size=0", lambda: P.clipping_sweep(al.mlp(), data(), micro_batch_size=0), "micro_batch_size", "0"),
    bad("precision.clipping_sweep", "model 'x'", lambda: P.clipping_sweep("x", data(), micro_batch_size=2), "model", "str"),
    bad("precision.fused_with_scaler", "n=30 (not whole windows)", lambda: P.fused_with_scaler(n=30), "n", "30"),
    bad("precision.fused_with_scaler", "n=0", lambda: P.fused_with_scaler(n=0), "n", "0"),
    bad("precision.real_schedules", "accumulation_steps=0", lambda: P.real_schedules(0), "accumulation_steps", "0"),
    bad("precision.real_schedules", "warmup_steps=40 of 40", lambda: P.real_schedules(2, warmup_steps=40), "warmup_steps", "40"),
    bad("precision.real_schedules", "schedulers ('adam',)", lambda: P.real_schedules(2, schedulers=("adam",)), "schedulers[0]", "'adam'"),
    bad("precision.real_schedules", "lr=nan", lambda: P.real_schedules(2, lr=NAN), "lr", "nan"),
    bad("precision.real_schedules", "optimizer_steps=10**9", lambda: P.real_schedules(4, optimizer_steps=10**9), "optimizer_steps"),
    bad("precision.plot_real_schedules", "result {}", lambda: P.plot_real_schedules({}), "result"),
    bad("precision.clipped_updates", "max_norm=nan", lambda: P.clipped_updates(al.mlp(), data(), micro_batch_size=2, max_norm=NAN), "max_norm"),
    bad("precision.clipped_updates", "placements 'window'", lambda: P.clipped_updates(al.mlp(), data(), micro_batch_size=2, max_norm=1.0, placements="window"), "placements", "str"),
    bad("precision.clipped_updates", "model 'x'", lambda: P.clipped_updates("x", data(), micro_batch_size=2, max_norm=1.0), "model", "str"),
    bad("precision.clipped_updates", "lr=inf", lambda: P.clipped_updates(al.mlp(), data(), micro_batch_size=2, max_norm=1.0, lr=INF), "lr", "inf"),
    bad("precision.explorer_data", "k=0", lambda: P.explorer_data(0), "k", "0"),
    bad("precision.explorer_data", "precision 'fp16'", lambda: P.explorer_data(precision="fp16"), "precision", "'fp16'"),
    bad("precision.explorer_data", "clip_at 'never'", lambda: P.explorer_data(clip_at="never"), "clip_at", "'never'"),
    bad("precision.explorer_data", "lr=nan", lambda: P.explorer_data(lr=NAN), "lr", "nan"),
    bad("precision.grad_dtypes", "low 'fp16'", lambda: P.grad_dtypes("fp16"), "low", "'fp16'"),
    bad("precision.grad_dtypes", "seed=-1", lambda: P.grad_dtypes(seed=-1), "seed", "-1"),
    bad("precision.max_param_gap", "a 'x'", lambda: P.max_param_gap("x", {"w": torch.ones(2)}), "a", "str"),
    bad("precision.max_param_gap", "different names", lambda: P.max_param_gap({"w": torch.ones(2)}, {"v": torch.ones(2)}), "'w'", "'v'"),
    handled("precision.max_param_gap", "nan in a is no match", lambda: P.max_param_gap({"w": torch.tensor([NAN])}, {"w": torch.ones(1)}), lambda g: g == INF),
    bad("precision.micro_batch_grads", "k=10**9", lambda: P.micro_batch_grads(10**9), "k"),
    bad("precision.micro_batch_grads", "features=10**9", lambda: P.micro_batch_grads(4, features=10**9), "features"),
    bad("precision.micro_batch_grads", "seed=-1", lambda: P.micro_batch_grads(4, seed=-1), "seed", "-1"),
    bad("precision.plot_explorer", "data {}", lambda: P.plot_explorer({}), "data"),
    bad("precision.update_explorer", "data {}", lambda: P.update_explorer(Figure(), {}), "data"),
    bad("precision.plot_precision", "sweep {}", lambda: P.plot_precision({}), "sweep"),
    bad("precision.plot_scales", "traces {}", lambda: P.plot_scales({}), "traces"),
    bad("precision.plot_scales", "a trace 5", lambda: P.plot_scales({"a": 5}), "traces", "int"),
    bad("precision.plot_schedules", "curves {}", lambda: P.plot_schedules({}), "curves"),
    bad("precision.plot_skip_conventions", "conv {}", lambda: P.plot_skip_conventions({}), "conv"),
    bad("precision.plot_update_norms", "labels 'abc'", lambda: P.plot_update_norms("abc", [1.0, 2.0, 3.0]), "labels", "str"),
    bad("precision.plot_update_norms", "3 labels, 2 norms", lambda: P.plot_update_norms(["a", "b", "c"], [1.0, 2.0]), "labels", "norms"),
    bad("precision.plot_update_norms", "norms [nan]", lambda: P.plot_update_norms(["a"], [NAN]), "norms", "nan"),
    bad("precision.record_results", "device 'tpu'", lambda: P.record_results("tpu"), "device", "'tpu'"),
    bad("precision.record_results", "size 'huge'", lambda: P.record_results("cpu", "huge"), "size", "'huge'"),
    bad("precision.schedule_curves", "accumulation_steps=0", lambda: P.schedule_curves(0), "accumulation_steps"),
    bad("precision.schedule_curves", "placements 'micro_step'", lambda: P.schedule_curves(2, placements="micro_step"), "placements", "str"),
    bad("precision.schedule_curves", "warmup_steps=100 of 40", lambda: P.schedule_curves(2, warmup_steps=100), "warmup_steps", "100"),
    bad("precision.schedule_curves", "lr=nan", lambda: P.schedule_curves(2, lr=NAN), "lr", "nan"),
    bad("precision.skip_conventions", "windows=0", lambda: P.skip_conventions(windows=0), "windows", "0"),
    bad("precision.skip_conventions", "skipped_windows [99]", lambda: P.skip_conventions(skipped_windows=(99,)), "skipped_windows", "99"),
    bad("precision.skip_conventions", "skipped_windows 1", lambda: P.skip_conventions(skipped_windows=1), "skipped_windows", "1"),
    bad("precision.skip_conventions", "lr=nan", lambda: P.skip_conventions(lr=NAN), "lr", "nan"),
    bad("precision.update_norm", "'x'", lambda: P.update_norm("x"), "update"),
    bad("precision.update_norm", "a value 'x'", lambda: P.update_norm({"w": "x"}), "update", "'w'"),
    bad("precision.warmup_cosine", "total < warmup", lambda: P.warmup_cosine(10, 2), "warmup_steps"),
    bad("precision.warmup_cosine", "min_ratio '0.1'", lambda: P.warmup_cosine(2, 10, min_ratio="0.1"), "min_ratio", "'0.1'"),
    bad("precision.warmup_cosine", "min_ratio nan", lambda: P.warmup_cosine(2, 10, min_ratio=NAN), "min_ratio", "nan"),
]
# fmt: on
