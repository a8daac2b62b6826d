"""Lesson 12 (al.scale): bad inputs and what each must do. Nothing here may start a process."""

from __future__ import annotations

import torch
from fuzz_harness import bad, handled
from matplotlib.figure import Figure

import accumlab as al

from . import INF, NAN, data

S = al.scale


# fmt: off
CASES = [
    bad("scale.plot_scale_explorer", "data {}", lambda: S.plot_scale_explorer({}), "data"),
    bad("scale.plot_scale_explorer", "errors {}", lambda: S.plot_scale_explorer(S.explorer_data(), errors={}), "errors"),
    bad("scale.update_scale_explorer", "data {}", lambda: S.update_scale_explorer(Figure(), {}), "data"),
    bad("scale.update_scale_explorer", "fig 'x'", lambda: S.update_scale_explorer("x", S.explorer_data()), "fig", "str"),
    bad("scale.update_scale_explorer", "another figure", lambda: S.update_scale_explorer(Figure(), S.explorer_data()), "fig", "artist"),
    # accumulator.py
    bad("scale.MainGrad", "model 'x'", lambda: S.MainGrad("x"), "model", "str"),
    bad("scale.MainGrad", "dtype 'float32'", lambda: S.MainGrad(al.mlp(), "float32"), "dtype", "'float32'"),
    bad("scale.MainGrad", "dtype bfloat16", lambda: S.MainGrad(al.mlp(), torch.bfloat16), "dtype", "bfloat16"),
    bad("scale.accumulate", "accumulator 'bf16'", lambda: S.accumulate(al.mlp(), data().micro_batches(2), "bf16"), "accumulator", "'bf16'"),
    bad("scale.accumulate", "micro_batches 'abc'", lambda: S.accumulate(al.mlp(), "abc", "bfloat16 .grad"), "micro_batches", "str"),
    bad("scale.accumulate", "micro_batches []", lambda: S.accumulate(al.mlp(), [], "bfloat16 .grad"), "micro_batches"),
    bad("scale.accumulate", "a micro-batch a tuple", lambda: S.accumulate(al.mlp(), [(torch.ones(2, 4), torch.ones(2, 1))], "bfloat16 .grad"), "micro_batches", "tuple"),
    bad("scale.accumulate", "model 'x'", lambda: S.accumulate("x", data().micro_batches(2), "bfloat16 .grad"), "model", "str"),
    bad("scale.accumulate", "y (2,) against an output (2, 1)", lambda: S.accumulate(al.mlp(), al.Data(data().x, data().y[:, 0]).micro_batches(2), "bfloat16 .grad"), "(2, 1)", "(2,)"),
    bad("scale.accumulator_errors", "ks '48'", lambda: S.accumulator_errors("48"), "ks", "str"),
    bad("scale.accumulator_errors", "ks [10**9]", lambda: S.accumulator_errors([10**9]), "ks"),
    bad("scale.accumulator_errors", "accumulators 'bfloat16 .grad'", lambda: S.accumulator_errors([2], "bfloat16 .grad"), "accumulators", "str"),
    bad("scale.accumulator_errors", "micro_batch_size=10**9", lambda: S.accumulator_errors([2], micro_batch_size=10**9), "micro_batch_size"),
    bad("scale.accumulator_errors", "seed=-1", lambda: S.accumulator_errors([2], seed=-1), "seed", "-1"),
    bad("scale.bf16_rounding", "limit=1", lambda: S.bf16_rounding(1), "limit", "1"),
    bad("scale.bf16_rounding", "limit=10**12", lambda: S.bf16_rounding(10**12), "limit"),
    # schedule.py
    bad("scale.bubble_fraction", "stages=0", lambda: S.bubble_fraction(0, 4), "stages", "0"),
    bad("scale.bubble_fraction", "micro_batches 4.0", lambda: S.bubble_fraction(2, 4.0), "micro_batches", "4.0"),
    bad("scale.schedule_order", "schedule 'gpipe'", lambda: S.schedule_order("gpipe", 2, 4), "schedule", "'GPipe'"),
    bad("scale.schedule_order", "micro_batches=10**9", lambda: S.schedule_order("GPipe", 2, 10**9), "micro_batches"),
    bad("scale.schedule_order", "1F1B with m < S", lambda: S.schedule_order("1F1B", 4, 2), "micro_batches", "2"),
    bad("scale.in_flight", "order 'FB'", lambda: S.in_flight("FB"), "order", "str"),
    bad("scale.in_flight", "a pass ('X', 0)", lambda: S.in_flight([("X", 0)]), "order", "'X'"),
    bad("scale.replay", "orders 'x'", lambda: S.replay("x"), "orders", "'x'"),
    bad("scale.replay", "t_forward=nan", lambda: S.replay(S.schedule_order("GPipe", 2, 2), t_forward=NAN), "t_forward", "nan"),
    bad("scale.replay", "a pass 'F0'", lambda: S.replay([["F0"]]), "orders", "'F0'"),
    bad("scale.replay", "orders that never finish", lambda: S.replay([[("B", 0)], [("F", 0)]]), "orders"),
    bad("scale.bubble_curves", "stages '24'", lambda: S.bubble_curves("24", [1, 2]), "stages", "str"),
    bad("scale.bubble_curves", "micro_batches [0]", lambda: S.bubble_curves([2], [0]), "micro_batches", "0"),
    bad("scale.bubble_curves", "stages [10**6]", lambda: S.bubble_curves([10**6], [10**6]), "stages"),
    # pipeline.py
    bad("scale.pipeline_experiments", "timeout=inf", lambda: S.pipeline_experiments(timeout=INF), "timeout", "inf", no_processes=True),
    bad("scale.pipeline_experiments", "seed=-1", lambda: S.pipeline_experiments(seed=-1), "seed", "-1", no_processes=True),
    bad("scale.weights_of", "parts []", lambda: S.weights_of({"w": torch.ones(2)}, []), "parts"),
    bad("scale.weights_of", "result 'x'", lambda: S.weights_of("x", [{"w": torch.ones(2)}]), "result", "str"),
    bad("scale.weights_of", "parts naming other parameters", lambda: S.weights_of({"w": torch.ones(2)}, [{"v": torch.ones(2)}]), "'w'", "'v'"),
    # recompiles.py
    bad("scale.CompileCounter", "backend 'Inductor'", lambda: S.CompileCounter("Inductor"), "backend", "'inductor'"),
    bad("scale.compiled_accumulation", "sizes '442'", lambda: S.compiled_accumulation("442"), "sizes", "str"),
    bad("scale.compiled_accumulation", "fix 'Pad'", lambda: S.compiled_accumulation(fix="Pad"), "fix", "'pad'"),
    bad("scale.compiled_accumulation", "backend 'x'", lambda: S.compiled_accumulation(backend="x"), "backend", "'x'"),
    bad("scale.compiled_accumulation", "windows=10**9", lambda: S.compiled_accumulation(windows=10**9), "windows"),
    bad("scale.compiled_accumulation", "sizes [10**9]", lambda: S.compiled_accumulation([10**9]), "sizes"),
    bad("scale.zero_grad_recompiles", "set_to_none 'yes'", lambda: S.zero_grad_recompiles(set_to_none="yes"), "set_to_none", "str"),
    bad("scale.zero_grad_recompiles", "set_to_none ['no']", lambda: S.zero_grad_recompiles(set_to_none=["no"]), "set_to_none", "'no'"),
    bad("scale.zero_grad_recompiles", "windows=10**9", lambda: S.zero_grad_recompiles(windows=10**9), "windows"),
    bad("scale.zero_grad_recompiles", "backend 'x'", lambda: S.zero_grad_recompiles(backend="x"), "backend", "'x'"),
    bad("scale.zero_grad_recompiles", "compiled_autograd 'yes'", lambda: S.zero_grad_recompiles(compiled_autograd="yes"), "compiled_autograd", "'yes'"),
    # noise.py, batch_sweep.py
    bad("scale.Problem", "features=0", lambda: S.Problem(0), "features", "0"),
    bad("scale.Problem", "features=10**9", lambda: S.Problem(10**9), "features"),
    bad("scale.Problem", "noise=nan", lambda: S.Problem(noise=NAN), "noise", "nan"),
    bad("scale.Problem.b_simple", "excess=0", lambda: S.Problem().b_simple(0), "excess", "0"),
    bad("scale.measure_b_simple", "problem 'x'", lambda: S.measure_b_simple("x", 0.1), "problem", "str"),
    bad("scale.measure_b_simple", "excess=-1", lambda: S.measure_b_simple(S.Problem(), -1.0), "excess", "-1"),
    bad("scale.measure_b_simple", "samples=10**10", lambda: S.measure_b_simple(S.Problem(), 0.1, samples=10**10), "samples"),
    bad("scale.noise_scale", "grads 1-d", lambda: S.noise_scale(torch.ones(4)), "grads", "(4,)"),
    bad("scale.noise_scale", "grads [nan]", lambda: S.noise_scale(torch.full((4, 2), NAN)), "grads", "nan"),
    bad("scale.per_sample_grads", "w 'x'", lambda: S.per_sample_grads("x", torch.ones(4, 2), torch.ones(4)), "w", "str"),
    bad("scale.per_sample_grads", "x of 3 features, w of 2", lambda: S.per_sample_grads(torch.ones(2), torch.ones(4, 3), torch.ones(4)), "x", "(4, 3)"),
    bad("scale.batch_gradients", "e 2-d, x 2-d", lambda: S.batch_gradients(torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 4)), "x", "(2, 3)"),
    bad("scale.batch_size_sweep", "batch_sizes '12'", lambda: S.batch_size_sweep(batch_sizes="12"), "batch_sizes", "str"),
    bad("scale.batch_size_sweep", "target above start", lambda: S.batch_size_sweep(start_excess=0.1, target_excess=1.0), "target_excess", "1.0"),
    bad("scale.batch_size_sweep", "seeds=10**9", lambda: S.batch_size_sweep(seeds=10**9), "seeds"),
    bad("scale.batch_size_sweep", "batch_sizes [10**9]", lambda: S.batch_size_sweep(batch_sizes=[10**9]), "batch_sizes"),
    bad("scale.batch_size_sweep", "max_samples=10**15", lambda: S.batch_size_sweep(max_samples=10**15), "max_samples"),
    bad("scale.fit", "one finite step count", lambda: S.fit([1, 2], [10.0, INF]), "steps"),
    bad("scale.fit", "batch_sizes 'ab'", lambda: S.fit("ab", [1.0, 2.0]), "batch_sizes", "str"),
    bad("scale.fit", "different lengths", lambda: S.fit([1, 2, 4], [3.0, 2.0]), "batch_sizes", "steps"),
    bad("scale.tradeoff_curve", "s_min=0", lambda: S.tradeoff_curve(0.0, 10.0, [1, 2]), "s_min", "0"),
    bad("scale.tradeoff_curve", "batch_sizes [0]", lambda: S.tradeoff_curve(1.0, 10.0, [0]), "batch_sizes", "0"),
    handled("scale.tradeoff_curve", "a fitted curve", lambda: S.tradeoff_curve(2.0, 8.0, [4]), lambda c: c["steps"] == [4.0] and c["samples"] == [16.0]),
    # explorer.py, plots.py
    bad("scale.explorer_data", "micro_batches=0", lambda: S.explorer_data(0), "micro_batches", "0"),
    bad("scale.explorer_data", "stages=99", lambda: S.explorer_data(4, 99), "stages", "99"),
    bad("scale.explorer_data", "schedule '1f1b'", lambda: S.explorer_data(schedule="1f1b"), "schedule", "'1F1B'"),
    bad("scale.scale_explorer", "errors 'x'", lambda: S.scale_explorer("x"), "errors", "str"),
    bad("scale.plot_accumulators", "sweep {}", lambda: S.plot_accumulators({}), "sweep"),
    bad("scale.plot_schedules", "replays {}", lambda: S.plot_schedules({}), "replays"),
    bad("scale.plot_schedules", "a replay {}", lambda: S.plot_schedules({"a": {}}), "replays"),
    bad("scale.plot_bubble", "curves {}", lambda: S.plot_bubble({}), "curves"),
    bad("scale.plot_bubble", "recorded 'x'", lambda: S.plot_bubble(S.bubble_curves([2], [1, 2]), "x"), "recorded", "str"),
    bad("scale.plot_step_weights", "names 'gpipe'", lambda: S.plot_step_weights({"gpipe": {"weights": {"weights": [1.0]}}}, "gpipe"), "names", "str"),
    bad("scale.plot_step_weights", "a name not among the experiments", lambda: S.plot_step_weights({}, ["gpipe"]), "names", "'gpipe'"),
    bad("scale.plot_recompiles", "results {}", lambda: S.plot_recompiles({}), "results"),
    bad("scale.plot_batch_sweep", "sweep {}", lambda: S.plot_batch_sweep({}, {}, {}, 8.0), "sweep"),
    bad("scale.plot_batch_sweep", "b_simple nan", lambda: S.plot_batch_sweep({"batch_sizes": [1], "steps": [1.0], "samples": [1.0]}, {"b_crit": 1.0}, {"batch_sizes": [1], "steps": [1.0], "samples": [1.0]}, NAN), "b_simple", "nan"),
]
# fmt: on
