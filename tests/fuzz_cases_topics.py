"""Bad-input cases for the topic folders, found failing when the core was fixed (phase 2 work).

Not collected by pytest (the name does not start with test_). See what each does today with
    python tests/fuzz_harness.py tests/fuzz_cases_topics.py
and, once a topic handles its cases, move them into a tests/test_fuzz_<topic>.py (see the
docstring of tests/test_fuzz_api.py). Signatures are those of the topic folders before phase 2.
"""

from __future__ import annotations

import torch
from fuzz_harness import bad, handled

import accumlab as al

NAN, INF = float("nan"), float("inf")


def _data(n=8, features=4):
    return al.regression_data(n, features)


def _spin(*args, **kwargs):
    while True:
        pass


def _many_steps(model, optimizer, batches, k, **kwargs):
    for _ in range(10**6):
        optimizer.step()


def _audit(train_fn):
    return al.audit.audit(train_fn, **al.audit.audit_setup())


def _not_skipped_silently(trace) -> bool:
    moved = any(
        not torch.equal(trace.params[-1][n], trace.initial_params[n]) for n in trace.initial_params
    )
    return moved or any(trace.skipped)


# one row per case reads as a table
# fmt: off
CASES = [
    # --- audit (lesson 08): a learner's loop runs here, so it needs a time and step limit ------
    bad("audit.audit", "train_fn spins without calling the model", lambda: _audit(_spin), "train_fn"),
    bad("audit.audit", "optimizer.step() 10**6 times", lambda: _audit(_many_steps), "step"),
    bad("audit.audit", "train_fn 5", lambda: al.audit.audit(5, **al.audit.audit_setup()), "train_fn"),
    bad("audit.audit_setup", "name 'regresion'", lambda: al.audit.audit_setup("regresion"), "'regression'"),
    bad("audit.catalogue_loop", "'nope'", lambda: al.audit.catalogue_loop("nope"), "'nope'"),
    # --- precision (lesson 06) -------------------------------------------------------------------
    handled("precision.amp_train", "init_scale=inf", lambda: al.precision.amp_train(al.mlp(dtype=torch.float32), _data().to(torch.float32), micro_batch_size=2, accumulation_steps=2, init_scale=INF), _not_skipped_silently),
    bad("precision.amp_train", "device 'cuda' on a CPU machine", lambda: al.precision.amp_train(al.mlp(), _data(), micro_batch_size=2, accumulation_steps=2, device="cuda"), "no CUDA device"),
    bad("precision.amp_train", "order 'Correct'", lambda: al.precision.amp_train(al.mlp(), _data(), micro_batch_size=2, accumulation_steps=2, order="Correct"), "'correct'"),
    bad("precision.amp_train", "lr=nan", lambda: al.precision.amp_train(al.mlp(), _data(), micro_batch_size=2, accumulation_steps=2, lr=NAN), "lr"),
    bad("precision.accumulate", "accumulation 'fp16'", lambda: al.precision.accumulate(torch.ones(4, 3), "fp16"), "accumulation", "'fp16'"),
    bad("precision.accumulate", "device 'tpu'", lambda: al.precision.accumulate(torch.ones(4, 3), "float32", device="tpu"), "device", "'tpu'"),
    bad("precision.accumulation_errors", "ks=[10**9]", lambda: al.precision.accumulation_errors([10**9]), "ks"),
    bad("precision.accumulation_errors", "ks='48'", lambda: al.precision.accumulation_errors("48"), "ks", "str"),
    bad("precision.micro_batch_grads", "k=10**9", lambda: al.precision.micro_batch_grads(10**9), "k"),
    bad("precision.warmup_cosine", "total < warmup", lambda: al.precision.warmup_cosine(10, 2), "warmup_steps"),
    bad("precision.schedule_curves", "accumulation_steps=0", lambda: al.precision.schedule_curves(0), "accumulation_steps"),
    bad("precision.update_norm", "'x'", lambda: al.precision.update_norm("x"), "update"),
    bad("precision.autocast_dtype", "'tpu'", lambda: al.precision.autocast_dtype("tpu"), "device"),
    bad("precision.adam_comparison", "accumulation_steps=10**9", lambda: al.precision.adam_comparison(10**9), "accumulation_steps"),
    bad("precision.clipped_updates", "max_norm=nan", lambda: al.precision.clipped_updates(al.mlp(), _data(), micro_batch_size=2, max_norm=NAN), "max_norm"),
    # --- memory (lesson 05) ----------------------------------------------------------------------
    bad("memory.proportional_deviation", "sizes [0, 0]", lambda: al.memory.proportional_deviation([0, 0], [1.0, 2.0]), "sizes"),
    bad("memory.proportional_deviation", "lengths differ", lambda: al.memory.proportional_deviation([1, 2], [1.0]), "values"),
    bad("memory.memory_setup", "width=10**6", lambda: al.memory.memory_setup(width=10**6), "width"),
    bad("memory.memory_setup", "device 'cuda' on a CPU machine", lambda: al.memory.memory_setup(device="cuda"), "no CUDA device"),
    bad("memory.footprint", "model 'x'", lambda: al.memory.footprint("x", _data(), 2), "model"),
    bad("memory.footprint", "optimizer 'Adam'", lambda: al.memory.footprint(al.mlp(), _data(), 2, optimizer="Adam"), "'adam'"),
    bad("memory.floor_bytes", "model None", lambda: al.memory.floor_bytes(None), "model"),
    bad("memory.choose_micro_batch", "budget_bytes=-1", lambda: al.memory.choose_micro_batch(al.mlp(), _data(), -1), "budget_bytes"),
    bad("memory.choose_micro_batch", "budget_bytes=nan", lambda: al.memory.choose_micro_batch(al.mlp(), _data(), NAN), "budget_bytes"),
    bad("memory.memory_sweep", "micro_sizes '24'", lambda: al.memory.memory_sweep(al.mlp(), _data(), "24"), "micro_sizes"),
    bad("memory.memory_sweep", "micro_sizes [0]", lambda: al.memory.memory_sweep(al.mlp(), _data(), [0]), "micro_sizes"),
    bad("memory.checkpointed", "segments=0", lambda: al.memory.checkpointed(al.mlp(), 0), "segments"),
    bad("memory.checkpointed", "segments=10**6", lambda: al.memory.checkpointed(al.mlp(), 10**6), "segments"),
    bad("memory.time_step", "repeats=10**9", lambda: al.memory.time_step(al.mlp(), _data(), 2, repeats=10**9), "repeats"),
    bad("memory.train_step", "micro_batches 'abc'", lambda: al.memory.train_step(al.mlp(), torch.optim.SGD(al.mlp().parameters(), 0.1), "abc"), "micro_batches"),
    bad("memory.tensor_bytes", "5", lambda: al.memory.tensor_bytes(5), "tensors"),
    bad("memory.graph_nodes", "'x'", lambda: al.memory.graph_nodes("x"), "value"),
    bad("memory.logging_growth", "log 'Tensor'", lambda: al.memory.logging_growth(al.mlp(), _data(), 2, log="Tensor"), "'tensor'"),
    bad("memory.peak_saved_bytes", "loop 'x'", lambda: al.memory.peak_saved_bytes(al.mlp(), _data(), 2, "x"), "loop"),
    bad("memory.step_time_sweep", "micro_sizes [10**9]", lambda: al.memory.step_time_sweep(al.mlp(), _data(), [10**9]), "micro_sizes"),
    # --- batchnorm (lesson 04) -------------------------------------------------------------------
    bad("batchnorm.matching_momentum", "momentum=nan", lambda: al.batchnorm.matching_momentum(NAN, 4), "momentum"),
    bad("batchnorm.matching_momentum", "momentum=1.5", lambda: al.batchnorm.matching_momentum(1.5, 4), "momentum"),
    bad("batchnorm.micro_batch_weights", "accumulation_steps=10**9", lambda: al.batchnorm.micro_batch_weights(0.1, 10**9), "accumulation_steps"),
    bad("batchnorm.old_weight_formula", "updates=-1", lambda: al.batchnorm.old_weight_formula(0.1, -1), "updates"),
    bad("batchnorm.batchnorm_data", "n=10**12", lambda: al.batchnorm.batchnorm_data(10**12), "n"),
    bad("batchnorm.norm_model", "norm 'Batch'", lambda: al.batchnorm.norm_model("Batch"), "'batch'"),
    bad("batchnorm.gradient_mismatch", "micro_batch_sizes '48'", lambda: al.batchnorm.gradient_mismatch(al.batchnorm.norm_model("batch"), al.batchnorm.batchnorm_data(16), "48"), "micro_batch_sizes"),
    bad("batchnorm.freeze_batchnorm", "model 'x'", lambda: al.batchnorm.freeze_batchnorm("x"), "model"),
    bad("batchnorm.with_momentum", "momentum=-1", lambda: al.batchnorm.with_momentum(al.batchnorm.norm_model("batch"), -1.0), "momentum"),
    bad("batchnorm.GhostBatchNorm1d", "ghost_batch_size=0", lambda: al.batchnorm.GhostBatchNorm1d(4, 0), "ghost_batch_size"),
    bad("batchnorm.explore_batchnorm", "norm 'x'", lambda: al.batchnorm.explore_batchnorm("x", 4, 2, 0.1), "norm"),
    bad("batchnorm.training_comparison", "epochs=10**9", lambda: al.batchnorm.training_comparison({"a": ("batch", 4, 2)}, al.batchnorm.batchnorm_data(16), al.batchnorm.batchnorm_data(16), epochs=10**9), "epochs"),
    bad("batchnorm.accuracy", "data 'x'", lambda: al.batchnorm.accuracy(al.batchnorm.norm_model("none"), "x"), "data"),
    # --- scaling (lesson 03) ---------------------------------------------------------------------
    bad("scaling.combined_loss", "tokens and means of different lengths", lambda: al.scaling.combined_loss([1, 2], [1.0]), "tokens", "means"),
    bad("scaling.combined_loss", "tokens [0, 0]", lambda: al.scaling.combined_loss([0, 0], [1.0, 2.0]), "tokens"),
    bad("scaling.combined_loss", "means [nan]", lambda: al.scaling.combined_loss([3], [NAN]), "means"),
    bad("scaling.linear_scaled_lr", "base_batch=0", lambda: al.scaling.linear_scaled_lr(0.1, 0, 8), "base_batch"),
    bad("scaling.linear_scaled_lr", "base_lr=nan", lambda: al.scaling.linear_scaled_lr(NAN, 4, 8), "base_lr"),
    bad("scaling.effective_batch_size", "ranks=0", lambda: al.scaling.effective_batch_size(4, 2, 0), "ranks"),
    bad("scaling.token_weights", "lengths 'abc'", lambda: al.scaling.token_weights("abc"), "lengths", "str"),
    bad("scaling.per_token", "lengths with a 0", lambda: al.scaling.per_token(torch.ones(2), [3, 0]), "lengths"),
    bad("scaling.effective_weights", "counts 'abc'", lambda: al.scaling.effective_weights("abc", al.Recipe(1)), "counts"),
    bad("scaling.sample_weights", "n=10**9", lambda: al.scaling.sample_weights(10**9, 2, 2), "n"),
    bad("scaling.rank_slices", "ranks=0", lambda: al.scaling.rank_slices(_data(), 0), "ranks"),
    bad("scaling.rank_slices", "ranks=100", lambda: al.scaling.rank_slices(_data(), 100), "ranks"),
    bad("scaling.scale_grads", "factor nan", lambda: al.scaling.scale_grads({"w": torch.ones(2)}, NAN), "factor"),
    bad("scaling.linear_scaling_gap", "lrs 'abc'", lambda: al.scaling.linear_scaling_gap(al.mlp(), _data(), 2, 2, "abc"), "lrs"),
    bad("scaling.loss_scaling_data", "spread=10**9", lambda: al.scaling.loss_scaling_data(spread=10**9), "spread"),
    bad("scaling.item_loss_sums", "pred (4, 1), target (4,)", lambda: al.scaling.item_loss_sums("mse", torch.zeros(4, 1), torch.zeros(4)), "(4, 1)", "(4,)"),
    # --- autograd and accumulation (lessons 00-02) ------------------------------------------------
    bad("autograd.summed_loss_graph", "n=10**6", lambda: al.autograd.summed_loss_graph(al.mlp(), _data(), 10**6), "n"),
    bad("autograd.summed_loss_graph", "model 'x'", lambda: al.autograd.summed_loss_graph("x", _data(), 2), "model"),
    bad("autograd.plot_graph_growth", "rows 'abc'", lambda: al.autograd.plot_graph_growth("abc"), "rows"),
    bad("accumulation.plot_accumulation_progress", "progress {}", lambda: al.accumulation.plot_accumulation_progress({}), "progress"),
    bad("accumulation.accumulation_explorer", "data 'x'", lambda: al.accumulation.accumulation_explorer(data="x"), "data"),
    # --- dist (lesson 07) ------------------------------------------------------------------------
    bad("dist.sync_experiments", "k=10**6", lambda: al.dist.sync_experiments(2, k=10**6), "k", no_processes=True),
    bad("dist.sync_experiments", "micro_batch=10**9", lambda: al.dist.sync_experiments(2, micro_batch=10**9), "micro_batch", no_processes=True),
    bad("dist.sync_experiments", "parts 'ddp'", lambda: al.dist.sync_experiments(2, parts="ddp"), "parts", "str", no_processes=True),
    bad("dist.sync_experiments", "timeout=inf", lambda: al.dist.sync_experiments(2, timeout=INF), "timeout", no_processes=True),
    bad("dist.sweep_view", "rows 'x'", lambda: al.dist.sweep_view("x", 2, 4, 8, True), "rows"),
    bad("dist.checks", "summary {}", lambda: al.dist.checks({}), "summary"),
    bad("dist.format_summary", "summary {}", lambda: al.dist.format_summary({}), "summary"),
    bad("dist.plot_sync_rounds", "ddp {}", lambda: al.dist.plot_sync_rounds({}), "ddp"),
    bad("dist.choose_plan", "gpu_count=-1", lambda: al.dist.choose_plan(2, -1), "gpu_count"),
]
# fmt: on
