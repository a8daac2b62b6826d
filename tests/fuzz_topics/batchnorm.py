"""Lesson 04 (al.batchnorm): bad inputs and what each must do."""

from __future__ import annotations

import torch
from fuzz_harness import bad, handled
from matplotlib.figure import Figure

import accumlab as al

from . import NAN, data

B = al.batchnorm


def _bn():
    return B.norm_model("batch")


def _data(n=16):
    return B.batchnorm_data(n)


def _zero_scale():
    model = _bn()
    with torch.no_grad():
        B.batchnorm_layers(model)[0].weight[3] = 0.0
    return model


def _stats():
    return B.micro_batch_stats(_bn(), _data(), 4)


def _trajectory():
    return B.running_mean_trajectory(_bn(), _data(), 4, 2, steps=1)


def _explored():
    return B.explore_batchnorm("batch", 4, 2, 0.1, data=_data())


def _training():
    return B.training_comparison({"a": ("batch", 4, 2)}, _data(), _data(), epochs=1, progress=False)


# fmt: off
CASES = [
    # layers.py
    bad("batchnorm.batchnorm_data", "n=10**12", lambda: B.batchnorm_data(10**12), "n"),
    bad("batchnorm.batchnorm_data", "n=0", lambda: B.batchnorm_data(0), "n", "0"),
    bad("batchnorm.batchnorm_data", "seed=-1", lambda: B.batchnorm_data(8, seed=-1), "seed", "-1"),
    bad("batchnorm.norm_model", "norm 'Batch'", lambda: B.norm_model("Batch"), "'batch'"),
    bad("batchnorm.norm_model", "features=0", lambda: B.norm_model("batch", features=0), "features", "0"),
    bad("batchnorm.norm_model", "hidden=10**9", lambda: B.norm_model("batch", hidden=10**9), "hidden"),
    bad("batchnorm.norm_model", "an unknown keyword", lambda: B.norm_model("batch", widht=4), "widht"),
    bad("batchnorm.norm_model", "track_running_stats 'no'", lambda: B.norm_model("batch", track_running_stats="no"), "track_running_stats", "'no'"),
    bad("batchnorm.norm_model", "track_running_stats=False for GroupNorm", lambda: B.norm_model("group", track_running_stats=False), "track_running_stats", "'group'"),
    handled("batchnorm.norm_model", "track_running_stats=False keeps no buffers", lambda: B.norm_model("batch", track_running_stats=False), lambda m: all(bn.running_mean is None for bn in B.batchnorm_layers(m))),
    bad("batchnorm.refusal", "layer 'x'", lambda: B.refusal("x", (1, 3)), "layer", "str"),
    bad("batchnorm.refusal", "shape '13'", lambda: B.refusal(torch.nn.BatchNorm1d(3), "13"), "shape", "str"),
    bad("batchnorm.refusal", "shape (0, 3)", lambda: B.refusal(torch.nn.BatchNorm1d(3), (0, 3)), "shape[0]", "0"),
    bad("batchnorm.refusal", "shape of 10**12 values", lambda: B.refusal(torch.nn.BatchNorm1d(3), (10**12, 3)), "shape"),
    bad("batchnorm.refusal", "training 'yes'", lambda: B.refusal(torch.nn.BatchNorm1d(3), (2, 3), training="yes"), "training", "'yes'"),
    handled("batchnorm.refusal", "one row in training mode", lambda: B.refusal(torch.nn.BatchNorm1d(3), (1, 3)), lambda said: "more than 1 value per channel" in said),
    bad("batchnorm.batchnorm_layers", "model 'x'", lambda: B.batchnorm_layers("x"), "model", "str"),
    handled("batchnorm.batchnorm_layers", "a model without BatchNorm", lambda: B.batchnorm_layers(B.norm_model("layer")), lambda layers: layers == []),
    bad("batchnorm.check_micro_batches", "model 'x'", lambda: B.check_micro_batches("x", _data(), 4), "model", "str"),
    bad("batchnorm.check_micro_batches", "data 'x'", lambda: B.check_micro_batches(_bn(), "x", 4), "data", "str"),
    bad("batchnorm.check_micro_batches", "micro_batch_size=1", lambda: B.check_micro_batches(_bn(), _data(), 1), "micro_batch_size", "1"),
    bad("batchnorm.check_micro_batches", "micro_batch_size=10**9", lambda: B.check_micro_batches(_bn(), _data(), 10**9), "micro_batch_size"),
    # stats.py
    bad("batchnorm.batch_gradient_diff", "model 'x'", lambda: B.batch_gradient_diff("x", _data(), 4), "model", "str"),
    bad("batchnorm.batch_gradient_diff", "data 'x'", lambda: B.batch_gradient_diff(_bn(), "x", 4), "data", "str"),
    bad("batchnorm.batch_gradient_diff", "micro_batch_size=0", lambda: B.batch_gradient_diff(_bn(), _data(), 0), "micro_batch_size", "0"),
    bad("batchnorm.batch_gradient_diff", "loss 'CE'", lambda: B.batch_gradient_diff(_bn(), _data(), 4, loss="CE"), "loss", "'CE'"),
    bad("batchnorm.batch_gradient_diff", "regression data", lambda: B.batch_gradient_diff(_bn(), data(16, 8), 4), "cross_entropy"),
    bad("batchnorm.batch_gradient_diff", "4 features into an 8-feature model", lambda: B.batch_gradient_diff(_bn(), al.classification_data(16, 4, 3), 4), "(4, 4)"),
    bad("batchnorm.gradient_mismatch", "micro_batch_sizes '48'", lambda: B.gradient_mismatch(_bn(), _data(), "48"), "micro_batch_sizes", "str"),
    bad("batchnorm.gradient_mismatch", "micro_batch_sizes []", lambda: B.gradient_mismatch(_bn(), _data(), []), "micro_batch_sizes"),
    bad("batchnorm.gradient_mismatch", "micro_batch_sizes [0]", lambda: B.gradient_mismatch(_bn(), _data(), [0]), "micro_batch_sizes[0]", "0"),
    bad("batchnorm.gradient_mismatch", "micro_batch_sizes [2] * 10**6", lambda: B.gradient_mismatch(_bn(), _data(), [2] * 10**6), "micro_batch_sizes"),
    bad("batchnorm.gradient_mismatch", "model 'x'", lambda: B.gradient_mismatch("x", _data(), [2]), "model", "str"),
    bad("batchnorm.micro_batch_stats", "model 'x'", lambda: B.micro_batch_stats("x", _data(), 4), "model", "str"),
    bad("batchnorm.micro_batch_stats", "data 'x'", lambda: B.micro_batch_stats(_bn(), "x", 4), "data", "str"),
    bad("batchnorm.micro_batch_stats", "micro_batch_size=0", lambda: B.micro_batch_stats(_bn(), _data(), 0), "micro_batch_size", "0"),
    bad("batchnorm.micro_batch_stats", "4 features into an 8-feature model", lambda: B.micro_batch_stats(_bn(), al.classification_data(16, 4, 3), 4), "(16, 4)"),
    bad("batchnorm.micro_batch_stats", "a model without Linear or norm layer", lambda: B.micro_batch_stats(torch.nn.Sequential(torch.nn.Conv1d(8, 3, 1)), _data(), 4), "model"),
    bad("batchnorm.norm_inputs", "model 'x'", lambda: B.norm_inputs("x", _data().x), "model", "str"),
    bad("batchnorm.norm_inputs", "x 'x'", lambda: B.norm_inputs(_bn(), "x"), "x", "str"),
    bad("batchnorm.norm_inputs", "x a Data", lambda: B.norm_inputs(_bn(), _data()), "x", "Data"),
    bad("batchnorm.norm_inputs", "4 features into an 8-feature model", lambda: B.norm_inputs(_bn(), torch.ones(4, 4)), "(4, 4)"),
    # measured.py
    bad("batchnorm.layer_statistics", "model 'x'", lambda: B.layer_statistics("x", _data(), 4), "model", "str"),
    bad("batchnorm.layer_statistics", "data 'x'", lambda: B.layer_statistics(_bn(), "x", 4), "data", "str"),
    bad("batchnorm.layer_statistics", "a model without BatchNorm", lambda: B.layer_statistics(B.norm_model("layer"), _data(), 4), "BatchNorm"),
    bad("batchnorm.layer_statistics", "micro_batch_size=1", lambda: B.layer_statistics(_bn(), _data(), 1), "micro_batch_size", "1"),
    bad("batchnorm.layer_statistics", "4 features into an 8-feature model", lambda: B.layer_statistics(_bn(), al.classification_data(16, 4, 3), 4), "(4, 4)"),
    bad("batchnorm.normalized_values", "model 'x'", lambda: B.normalized_values("x", _data(), 2), "model", "str"),
    bad("batchnorm.normalized_values", "data 'x'", lambda: B.normalized_values(_bn(), "x", 2), "data", "str"),
    bad("batchnorm.normalized_values", "a model without BatchNorm", lambda: B.normalized_values(B.norm_model("layer"), _data(), 2), "BatchNorm"),
    bad("batchnorm.normalized_values", "micro_batch_size=1", lambda: B.normalized_values(_bn(), _data(), 1), "micro_batch_size", "1"),
    bad("batchnorm.normalized_values", "a scale γ of 0", lambda: B.normalized_values(_zero_scale(), _data(), 2), "γ", "0"),
    handled("batchnorm.normalized_values", "micro-batches of 2 give ±a pairs", lambda: B.normalized_values(_bn(), _data(), 2), lambda out: all(float((v[0::2] + v[1::2]).abs().max()) < 1e-9 for v in out["normalized"])),
    # running.py
    bad("batchnorm.matching_momentum", "momentum=nan", lambda: B.matching_momentum(NAN, 4), "momentum"),
    bad("batchnorm.matching_momentum", "momentum=1.5", lambda: B.matching_momentum(1.5, 4), "momentum"),
    bad("batchnorm.matching_momentum", "accumulation_steps=0", lambda: B.matching_momentum(0.1, 0), "accumulation_steps", "0"),
    bad("batchnorm.micro_batch_weights", "accumulation_steps=10**9", lambda: B.micro_batch_weights(0.1, 10**9), "accumulation_steps"),
    bad("batchnorm.micro_batch_weights", "momentum=1.5", lambda: B.micro_batch_weights(1.5, 4), "momentum", "1.5"),
    bad("batchnorm.micro_batch_weights", "momentum=nan", lambda: B.micro_batch_weights(NAN, 4), "momentum", "nan"),
    handled("batchnorm.micro_batch_weights", "momentum=1 keeps only the last", lambda: B.micro_batch_weights(1.0, 3), lambda w: w == [0.0, 0.0, 1.0]),
    bad("batchnorm.old_weight_formula", "updates=-1", lambda: B.old_weight_formula(0.1, -1), "updates"),
    bad("batchnorm.old_weight_formula", "updates=2.5", lambda: B.old_weight_formula(0.1, 2.5), "updates", "2.5"),
    bad("batchnorm.old_weight_formula", "momentum=2", lambda: B.old_weight_formula(2.0, 3), "momentum", "2"),
    bad("batchnorm.old_weight_formula", "momentum=nan", lambda: B.old_weight_formula(NAN, 3), "momentum", "nan"),
    handled("batchnorm.old_weight_formula", "updates=0 keeps everything", lambda: B.old_weight_formula(0.1, 0), lambda w: w == 1.0),
    handled("batchnorm.old_weight_formula", "updates=10**9 is a closed form", lambda: B.old_weight_formula(0.1, 10**9), lambda w: w == 0.0),
    bad("batchnorm.running_mean_trajectory", "steps=10**9", lambda: B.running_mean_trajectory(_bn(), _data(), 4, 2, steps=10**9), "steps"),
    bad("batchnorm.running_mean_trajectory", "channel=99", lambda: B.running_mean_trajectory(_bn(), _data(), 4, 2, channel=99), "channel", "99"),
    bad("batchnorm.running_mean_trajectory", "channel '0'", lambda: B.running_mean_trajectory(_bn(), _data(), 4, 2, channel="0"), "channel", "'0'"),
    bad("batchnorm.running_mean_trajectory", "model 'x'", lambda: B.running_mean_trajectory("x", _data(), 4, 2), "model", "str"),
    bad("batchnorm.running_mean_trajectory", "data 'x'", lambda: B.running_mean_trajectory(_bn(), "x", 4, 2), "data", "str"),
    bad("batchnorm.running_mean_trajectory", "a model without BatchNorm", lambda: B.running_mean_trajectory(B.norm_model("none"), _data(), 4, 2), "BatchNorm"),
    bad("batchnorm.running_mean_trajectory", "a BatchNorm without running statistics", lambda: B.running_mean_trajectory(B.norm_model("batch", track_running_stats=False), _data(), 4, 2), "track_running_stats=False"),
    bad("batchnorm.running_stats_step", "model 'x'", lambda: B.running_stats_step("x", _data(), 4, 2), "model", "str"),
    bad("batchnorm.running_stats_step", "data 'x'", lambda: B.running_stats_step(_bn(), "x", 4, 2), "data", "str"),
    bad("batchnorm.running_stats_step", "accumulation_steps=0", lambda: B.running_stats_step(_bn(), _data(), 4, 0), "accumulation_steps", "0"),
    bad("batchnorm.running_stats_step", "window larger than the data", lambda: B.running_stats_step(_bn(), _data(), 4, 8), "32", "16"),
    bad("batchnorm.running_stats_step", "regression data", lambda: B.running_stats_step(_bn(), data(16, 8), 4, 2), "cross_entropy"),
    bad("batchnorm.with_momentum", "momentum=-1", lambda: B.with_momentum(_bn(), -1.0), "momentum"),
    bad("batchnorm.with_momentum", "momentum=1.5", lambda: B.with_momentum(_bn(), 1.5), "momentum", "1.5"),
    bad("batchnorm.with_momentum", "momentum '0.1'", lambda: B.with_momentum(_bn(), "0.1"), "momentum", "'0.1'"),
    bad("batchnorm.with_momentum", "model 'x'", lambda: B.with_momentum("x", 0.1), "model", "str"),
    handled("batchnorm.with_momentum", "momentum=None is the cumulative average", lambda: B.with_momentum(_bn(), None), lambda m: B.batchnorm_layers(m)[0].momentum is None),
    # remedies.py
    bad("batchnorm.GhostBatchNorm1d", "ghost_batch_size=0", lambda: B.GhostBatchNorm1d(4, 0), "ghost_batch_size"),
    bad("batchnorm.GhostBatchNorm1d", "num_features=0", lambda: B.GhostBatchNorm1d(0, 2), "num_features", "0"),
    bad("batchnorm.GhostBatchNorm1d", "num_features=10**12", lambda: B.GhostBatchNorm1d(10**12, 2), "num_features"),
    bad("batchnorm.GhostBatchNorm1d", "a last chunk of one sample", lambda: B.GhostBatchNorm1d(4, 2)(torch.ones(5, 4)), "ghost_batch_size", "1 sample"),
    bad("batchnorm.freeze_batchnorm", "model 'x'", lambda: B.freeze_batchnorm("x"), "model", "str"),
    bad("batchnorm.freeze_batchnorm", "a BatchNorm without running statistics", lambda: B.freeze_batchnorm(B.norm_model("batch", track_running_stats=False)), "track_running_stats=False", "'1'"),
    bad("batchnorm.ghost_batchnorm", "ghost_batch_size=1", lambda: B.ghost_batchnorm(_bn(), 1), "ghost_batch_size", "1"),
    bad("batchnorm.ghost_batchnorm", "model 'x'", lambda: B.ghost_batchnorm("x", 4), "model", "str"),
    bad("batchnorm.sync_batchnorm_sweep", "ranks '12'", lambda: B.sync_batchnorm_sweep(_bn(), _data(), 2, "12"), "ranks", "str"),
    bad("batchnorm.sync_batchnorm_sweep", "ranks [0]", lambda: B.sync_batchnorm_sweep(_bn(), _data(), 2, [0]), "ranks[0]", "0"),
    bad("batchnorm.sync_batchnorm_sweep", "ranks [3] does not divide", lambda: B.sync_batchnorm_sweep(_bn(), _data(), 2, [3]), "ranks", "16"),
    bad("batchnorm.sync_batchnorm_sweep", "model 'x'", lambda: B.sync_batchnorm_sweep("x", _data(), 2), "model", "str"),
    bad("batchnorm.sync_batchnorm_sweep", "data 'x'", lambda: B.sync_batchnorm_sweep(_bn(), "x", 2), "data", "str"),
    # recalibration.py
    bad("batchnorm.recalibrate", "model 'x'", lambda: B.recalibrate("x", _data()), "model", "str"),
    bad("batchnorm.recalibrate", "data 'x'", lambda: B.recalibrate(_bn(), "x"), "data", "str"),
    bad("batchnorm.recalibrate", "batch_size=1", lambda: B.recalibrate(_bn(), _data(), 1), "batch_size", "1"),
    bad("batchnorm.recalibrate", "a model without BatchNorm", lambda: B.recalibrate(B.norm_model("group"), _data()), "BatchNorm"),
    bad("batchnorm.recalibrate", "4 features into an 8-feature model", lambda: B.recalibrate(_bn(), al.classification_data(16, 4, 3)), "(1, 4)"),
    bad("batchnorm.recalibrate", "a BatchNorm without running statistics", lambda: B.recalibrate(B.norm_model("batch", track_running_stats=False), _data()), "track_running_stats=False"),
    # coupling.py
    bad("batchnorm.ReplayedDropout", "p=1.5", lambda: B.ReplayedDropout(1.5, 8), "p", "1.5"),
    bad("batchnorm.ReplayedDropout", "p=1", lambda: B.ReplayedDropout(1.0, 8), "p", "1.0"),
    bad("batchnorm.ReplayedDropout", "total=0", lambda: B.ReplayedDropout(0.5, 0), "total", "0"),
    bad("batchnorm.ReplayedDropout", "seed=-1", lambda: B.ReplayedDropout(0.5, 8, seed=-1), "seed", "-1"),
    bad("batchnorm.ReplayedDropout", "more samples than total", lambda: B.ReplayedDropout(0.5, 4)(torch.ones(8, 2)), "total", "8"),
    bad("batchnorm.TinyGRU", "features=0", lambda: B.TinyGRU(0), "features", "0"),
    bad("batchnorm.TinyGRU", "hidden=10**9", lambda: B.TinyGRU(hidden=10**9), "hidden"),
    bad("batchnorm.TinyGRU", "dtype int64", lambda: B.TinyGRU(dtype=torch.int64), "dtype", "int64"),
    bad("batchnorm.TinyGRU", "seed=-1", lambda: B.TinyGRU(seed=-1), "seed", "-1"),
    bad("batchnorm.replayed_dropout_diff", "a model without dropout", lambda: B.replayed_dropout_diff(_bn(), _data(), 4), "nn.Dropout"),
    bad("batchnorm.replayed_dropout_diff", "model 'x'", lambda: B.replayed_dropout_diff("x", _data(), 4), "model", "str"),
    bad("batchnorm.replayed_dropout_diff", "data 'x'", lambda: B.replayed_dropout_diff(B.norm_model("none", dropout=0.2), "x", 4), "data", "str"),
    bad("batchnorm.replayed_dropout_diff", "micro_batch_size=0", lambda: B.replayed_dropout_diff(B.norm_model("none", dropout=0.2), _data(), 0), "micro_batch_size", "0"),
    bad("batchnorm.replayed_dropout_diff", "seed=-1", lambda: B.replayed_dropout_diff(B.norm_model("none", dropout=0.2), _data(), 4, seed=-1), "seed", "-1"),
    bad("batchnorm.sequence_data", "steps=0", lambda: B.sequence_data(8, steps=0), "steps", "0"),
    bad("batchnorm.sequence_data", "n=10**12", lambda: B.sequence_data(10**12), "n"),
    bad("batchnorm.sequence_data", "features=10**9", lambda: B.sequence_data(8, features=10**9), "features"),
    bad("batchnorm.sequence_data", "features=0", lambda: B.sequence_data(8, features=0), "features", "0"),
    bad("batchnorm.truncated_bptt_diff", "model not a TinyGRU", lambda: B.truncated_bptt_diff(_bn(), B.sequence_data(8), 2), "model", "TinyGRU"),
    bad("batchnorm.truncated_bptt_diff", "data 'x'", lambda: B.truncated_bptt_diff(B.TinyGRU(), "x", 2), "data", "str"),
    bad("batchnorm.truncated_bptt_diff", "flat data", lambda: B.truncated_bptt_diff(B.TinyGRU(), _data(), 2), "data.x", "(16, 8)"),
    bad("batchnorm.truncated_bptt_diff", "chunks=1", lambda: B.truncated_bptt_diff(B.TinyGRU(), B.sequence_data(8), 1), "chunks", "1"),
    bad("batchnorm.truncated_bptt_diff", "chunks past the steps", lambda: B.truncated_bptt_diff(B.TinyGRU(), B.sequence_data(8, steps=4), 5), "chunks", "5"),
    # training.py
    bad("batchnorm.accuracy", "data 'x'", lambda: B.accuracy(B.norm_model("none"), "x"), "data"),
    bad("batchnorm.accuracy", "model 'x'", lambda: B.accuracy("x", _data()), "model", "str"),
    bad("batchnorm.accuracy", "regression data", lambda: B.accuracy(al.mlp(8), data(16, 8)), "data.y", "float"),
    bad("batchnorm.accuracy", "4 features into an 8-feature model", lambda: B.accuracy(_bn(), al.classification_data(16, 4, 3)), "(16, 4)"),
    bad("batchnorm.accuracy", "labels past the model's classes", lambda: B.accuracy(B.norm_model("none", outputs=2), _data()), "label", "2"),
    bad("batchnorm.training_comparison", "epochs=10**9", lambda: B.training_comparison({"a": ("batch", 4, 2)}, _data(), _data(), epochs=10**9), "epochs"),
    bad("batchnorm.training_comparison", "setups {}", lambda: B.training_comparison({}, _data(), _data()), "setups"),
    bad("batchnorm.training_comparison", "setups 'x'", lambda: B.training_comparison("x", _data(), _data()), "setups", "str"),
    bad("batchnorm.training_comparison", "a setup 'batch'", lambda: B.training_comparison({"a": "batch"}, _data(), _data()), "setups['a']", "'batch'"),
    bad("batchnorm.training_comparison", "a setup with norm 'Batch'", lambda: B.training_comparison({"a": ("Batch", 4, 2)}, _data(), _data()), "norm", "'batch'"),
    bad("batchnorm.training_comparison", "lr=nan", lambda: B.training_comparison({"a": ("batch", 4, 2)}, _data(), _data(), lr=NAN), "lr", "nan"),
    bad("batchnorm.training_comparison", "progress 'no'", lambda: B.training_comparison({"a": ("batch", 4, 2)}, _data(), _data(), progress="no"), "progress", "'no'"),
    bad("batchnorm.training_comparison", "seed=-1", lambda: B.training_comparison({"a": ("batch", 4, 2)}, _data(), _data(), seed=-1), "seed", "-1"),
    bad("batchnorm.training_comparison", "test 'x'", lambda: B.training_comparison({"a": ("batch", 4, 2)}, _data(), "x"), "test", "str"),
    bad("batchnorm.training_comparison", "test with other features", lambda: B.training_comparison({"a": ("batch", 4, 2)}, _data(), al.classification_data(16, 4, 3), epochs=1, progress=False), "test", "(16, 4)"),
    bad("batchnorm.accuracy_over_seeds", "seeds '012'", lambda: B.accuracy_over_seeds({"a": ("batch", 4, 2)}, _data(), _data(), seeds="012"), "seeds", "str"),
    bad("batchnorm.accuracy_over_seeds", "seeds []", lambda: B.accuracy_over_seeds({"a": ("batch", 4, 2)}, _data(), _data(), seeds=[]), "seeds"),
    bad("batchnorm.accuracy_over_seeds", "seeds [-1]", lambda: B.accuracy_over_seeds({"a": ("batch", 4, 2)}, _data(), _data(), seeds=[-1]), "seeds[0]", "-1"),
    bad("batchnorm.accuracy_over_seeds", "seeds range(10**6)", lambda: B.accuracy_over_seeds({"a": ("batch", 4, 2)}, _data(), _data(), seeds=range(10**6)), "seeds"),
    bad("batchnorm.accuracy_over_seeds", "epochs=10**9", lambda: B.accuracy_over_seeds({"a": ("batch", 4, 2)}, _data(), _data(), epochs=10**9), "epochs"),
    bad("batchnorm.accuracy_over_seeds", "setups {}", lambda: B.accuracy_over_seeds({}, _data(), _data()), "setups"),
    bad("batchnorm.accuracy_over_draws", "setups {}", lambda: B.accuracy_over_draws({}), "setups"),
    bad("batchnorm.accuracy_over_draws", "draws '012'", lambda: B.accuracy_over_draws({"a": ("batch", 4, 2)}, "012"), "draws", "str"),
    bad("batchnorm.accuracy_over_draws", "draws [-1]", lambda: B.accuracy_over_draws({"a": ("batch", 4, 2)}, [-1]), "draws[0]", "-1"),
    bad("batchnorm.accuracy_over_draws", "draws range(10**6)", lambda: B.accuracy_over_draws({"a": ("batch", 4, 2)}, range(10**6)), "draws"),
    bad("batchnorm.accuracy_over_draws", "train_size=1", lambda: B.accuracy_over_draws({"a": ("batch", 4, 2)}, train_size=1), "train_size", "1"),
    bad("batchnorm.accuracy_over_draws", "test_size=10**12", lambda: B.accuracy_over_draws({"a": ("batch", 4, 2)}, test_size=10**12), "n"),
    bad("batchnorm.accuracy_over_draws", "lr=nan", lambda: B.accuracy_over_draws({"a": ("batch", 4, 2)}, lr=NAN), "lr", "nan"),
    bad("batchnorm.accuracy_over_draws", "epochs=10**9", lambda: B.accuracy_over_draws({"a": ("batch", 4, 2)}, epochs=10**9), "epochs"),
    bad("batchnorm.dropout_expectation", "draws=10**9", lambda: B.dropout_expectation(B.norm_model("none", dropout=0.2), _data(), 4, draws=10**9), "draws"),
    bad("batchnorm.dropout_expectation", "draws=1 (no noise estimate)", lambda: B.dropout_expectation(B.norm_model("none", dropout=0.2), _data(), 4, draws=1), "draws", "1"),
    bad("batchnorm.dropout_expectation", "dropout p=0", lambda: B.dropout_expectation(torch.nn.Sequential(torch.nn.Linear(8, 3).double(), torch.nn.Dropout(0.0)), _data(), 4), "p > 0"),
    bad("batchnorm.dropout_expectation", "draws=0", lambda: B.dropout_expectation(B.norm_model("none", dropout=0.2), _data(), 4, draws=0), "draws", "0"),
    bad("batchnorm.dropout_expectation", "model 'x'", lambda: B.dropout_expectation("x", _data(), 4), "model", "str"),
    bad("batchnorm.dropout_expectation", "data 'x'", lambda: B.dropout_expectation(B.norm_model("none", dropout=0.2), "x", 4), "data", "str"),
    bad("batchnorm.dropout_expectation", "seed=-1", lambda: B.dropout_expectation(B.norm_model("none", dropout=0.2), _data(), 4, seed=-1), "seed", "-1"),
    # plots.py
    bad("batchnorm.plot_micro_batch_stats", "stats {}", lambda: B.plot_micro_batch_stats({}), "stats"),
    bad("batchnorm.plot_micro_batch_stats", "stats 'x'", lambda: B.plot_micro_batch_stats("x"), "stats", "str"),
    bad("batchnorm.plot_micro_batch_stats", "channels=0", lambda: B.plot_micro_batch_stats(_stats(), channels=0), "channels", "0"),
    bad("batchnorm.plot_gradient_mismatch", "curves {}", lambda: B.plot_gradient_mismatch({}), "curves"),
    bad("batchnorm.plot_gradient_mismatch", "a curve of one list", lambda: B.plot_gradient_mismatch({"a": [1, 2]}), "curves['a']"),
    bad("batchnorm.plot_gradient_mismatch", "xs and errors of different lengths", lambda: B.plot_gradient_mismatch({"a": ([1, 2], [0.1])}), "curves['a']", "2", "1"),
    bad("batchnorm.plot_gradient_mismatch", "an error nan", lambda: B.plot_gradient_mismatch({"a": ([1, 2], [0.1, NAN])}), "curves['a']", "nan"),
    bad("batchnorm.plot_gradient_mismatch", "a size 0 on a log axis", lambda: B.plot_gradient_mismatch({"a": ([0, 2], [0.1, 0.2])}), "curves['a']", "0"),
    bad("batchnorm.plot_old_weight", "momentum=nan", lambda: B.plot_old_weight(NAN, 0.1, 4, {}), "momentum", "nan"),
    bad("batchnorm.plot_old_weight", "accumulation_steps=10**9", lambda: B.plot_old_weight(0.1, 0.03, 10**9, {}), "accumulation_steps"),
    bad("batchnorm.plot_old_weight", "measured 'x'", lambda: B.plot_old_weight(0.1, 0.03, 4, "x"), "measured", "str"),
    bad("batchnorm.plot_old_weight", "a measured point not a pair", lambda: B.plot_old_weight(0.1, 0.03, 4, {"a": 0.5}), "measured['a']", "0.5"),
    bad("batchnorm.plot_running_trajectory", "traj {}", lambda: B.plot_running_trajectory({}), "traj"),
    bad("batchnorm.plot_running_trajectory", "a series of different lengths", lambda: B.plot_running_trajectory({**_trajectory(), "full": ([0.0, 1.0], [0.0])}), "traj", "full"),
    bad("batchnorm.plot_training", "result {}", lambda: B.plot_training({}), "result"),
    bad("batchnorm.plot_training", "labels and accuracy of different lengths", lambda: B.plot_training({**_training(), "accuracy": []}), "labels", "accuracy"),
    bad("batchnorm.plot_dropout_expectation", "result {}", lambda: B.plot_dropout_expectation({}), "result"),
    bad("batchnorm.plot_dropout_expectation", "a gap of 0 on a log axis", lambda: B.plot_dropout_expectation({"draws": [1, 2], "rel_gap": [0.0, 0.1], "slope": -0.5}), "rel_gap", "0"),
    bad("batchnorm.plot_batchnorm_explorer", "data {}", lambda: B.plot_batchnorm_explorer({}), "data"),
    bad("batchnorm.plot_batchnorm_explorer", "diff not a GradDiff", lambda: B.plot_batchnorm_explorer({**_explored(), "diff": 0.1}), "data", "diff"),
    bad("batchnorm.update_batchnorm_explorer", "data {}", lambda: B.update_batchnorm_explorer(Figure(), {}), "data"),
    bad("batchnorm.update_batchnorm_explorer", "a figure plot_batchnorm_explorer did not build", lambda: B.update_batchnorm_explorer(Figure(), _explored()), "fig", "no artist named"),
    # explorer.py
    bad("batchnorm.explore_batchnorm", "norm 'x'", lambda: B.explore_batchnorm("x", 4, 2, 0.1), "norm"),
    bad("batchnorm.explore_batchnorm", "momentum=nan", lambda: B.explore_batchnorm("batch", 4, 2, NAN), "momentum", "nan"),
    bad("batchnorm.explore_batchnorm", "momentum=nan for a LayerNorm", lambda: B.explore_batchnorm("layer", 4, 2, NAN), "momentum", "nan"),
    bad("batchnorm.explore_batchnorm", "data 'x'", lambda: B.explore_batchnorm("batch", 4, 2, 0.1, data="x"), "data", "str"),
    bad("batchnorm.explore_batchnorm", "micro_batch_size=1", lambda: B.explore_batchnorm("batch", 1, 2, 0.1), "micro_batch_size", "1"),
    bad("batchnorm.explore_batchnorm", "steps=0", lambda: B.explore_batchnorm("batch", 4, 2, 0.1, steps=0), "steps", "0"),
    bad("batchnorm.explore_batchnorm", "steps=10**6", lambda: B.explore_batchnorm("batch", 4, 2, 0.1, steps=10**6), "steps"),
    bad("batchnorm.batchnorm_explorer", "data 'x'", lambda: B.batchnorm_explorer("x"), "data", "str"),
    bad("batchnorm.batchnorm_explorer", "data of 3 samples", lambda: B.batchnorm_explorer(_data(3)), "data", "3"),
    bad("batchnorm.batchnorm_explorer", "regression data", lambda: B.batchnorm_explorer(data(16, 8)), "cross_entropy"),
]
# fmt: on
