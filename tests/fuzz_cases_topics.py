"""Bad-input cases of lessons 00-04's topic folders (accumulation, autograd, scaling, batchnorm).

Run by tests/test_fuzz_topics.py with the other topics' cases (tests/fuzz_topics/); the ones not
handled yet are listed there in OPEN and skipped as expected failures. See what each does today:
    python tests/fuzz_harness.py tests/fuzz_cases_topics.py
"""

from __future__ import annotations

import torch
from fuzz_harness import bad

import accumlab as al

NAN, INF = float("nan"), float("inf")


def _data(n=8, features=4):
    return al.regression_data(n, features)


# one row per case reads as a table
# fmt: off
CASES = [
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
    bad("accumulation.plot_window_progress", "progress {}", lambda: al.accumulation.plot_window_progress({}), "progress"),
    bad("accumulation.accumulation_explorer", "data 'x'", lambda: al.accumulation.accumulation_explorer(data="x"), "data"),
]
# fmt: on
