"""Lesson 03 (al.scaling): bad inputs and what each must do."""

from __future__ import annotations

import numpy as np
import torch
from fuzz_harness import bad, handled
from matplotlib.figure import Figure

import accumlab as al

from . import INF, NAN, data

S = al.scaling


def _trace(**kw):
    return al.run(al.Recipe(2, 2), al.mlp(), data(), optimizer="sgd", **kw)


def _grads():
    return al.full_batch_grads(al.mlp(), data())


def _lm():
    return al.TinyLM(vocab=8, dim=4)


def _tokens(n=4):
    return al.token_data(n, min_len=2, max_len=5, vocab=8)


def _weights():
    return {"mean": S.sample_weights(8, 2, 2)}


def _panels():
    return {"global": S.token_weights([2, 3], "global")}


def _curves(**change):
    curves = {"epoch": [0, 1], "full batch": [2.0, 1.5], "global count": [2.0, 1.5]}
    return {**curves, "mean of means": [2.0, 1.6], **change}


def _equal(a, b) -> bool:
    return a.shape == b.shape and bool(torch.equal(a, b))


# fmt: off
CASES = [
    # weights.py
    bad("scaling.effective_weights", "counts 'abc'", lambda: S.effective_weights("abc", al.Recipe(1)), "counts", "str"),
    bad("scaling.effective_weights", "counts [2.5]", lambda: S.effective_weights([2.5], al.Recipe(1)), "counts[0]", "2.5"),
    bad("scaling.effective_weights", "counts a 2-d tensor", lambda: S.effective_weights(torch.ones(2, 2, dtype=torch.long), al.Recipe(1)), "counts"),
    bad("scaling.effective_weights", "recipe 'x'", lambda: S.effective_weights([1, 2], "x"), "recipe", "str"),
    bad("scaling.effective_weights", "micro_batch_size above the samples", lambda: S.effective_weights([1, 2], al.Recipe(3)), "micro_batch_size", "3"),
    bad("scaling.sample_weights", "n=10**9", lambda: S.sample_weights(10**9, 2, 2), "n"),
    bad("scaling.sample_weights", "n=0", lambda: S.sample_weights(0, 2, 2), "n", "0"),
    bad("scaling.sample_weights", "items_per_sample=0", lambda: S.sample_weights(8, 2, 2, items_per_sample=0), "items_per_sample", "0"),
    bad("scaling.sample_weights", "normalization 'Mean'", lambda: S.sample_weights(8, 2, 2, normalization="Mean"), "normalization", "'mean'"),
    bad("scaling.item_loss_sums", "pred (4, 1), target (4,)", lambda: S.item_loss_sums("mse", torch.zeros(4, 1), torch.zeros(4)), "(4, 1)", "(4,)"),
    bad("scaling.item_loss_sums", "loss 'MSE'", lambda: S.item_loss_sums("MSE", torch.zeros(4, 1), torch.zeros(4, 1)), "loss", "'MSE'"),
    bad("scaling.item_loss_sums", "pred 'x'", lambda: S.item_loss_sums("mse", "x", torch.zeros(4)), "pred", "str"),
    bad("scaling.item_loss_sums", "cross_entropy with float targets", lambda: S.item_loss_sums("cross_entropy", torch.zeros(4, 3), torch.zeros(4)), "cross_entropy", "float32"),
    bad("scaling.item_loss_sums", "target a 0-d tensor", lambda: S.item_loss_sums("mse", torch.zeros(()), torch.zeros(())), "target"),
    handled("scaling.item_loss_sums", "token padding counts 0", lambda: S.item_loss_sums("cross_entropy", torch.zeros(1, 3, 4), torch.tensor([[1, -100, -100]])), lambda s: s.shape == (1,) and abs(float(s[0]) - float(torch.log(torch.tensor(4.0)))) < 1e-6),
    bad("scaling.weighted_grads", "per_item of the wrong length", lambda: S.weighted_grads(al.mlp(), data(), [1.0, 2.0]), "per_item", "8"),
    bad("scaling.weighted_grads", "per_item [nan]", lambda: S.weighted_grads(al.mlp(), data(), [NAN] * 8), "per_item", "nan"),
    bad("scaling.weighted_grads", "per_item 'abc'", lambda: S.weighted_grads(al.mlp(), data(), "abc"), "per_item", "str"),
    bad("scaling.weighted_grads", "model 'x'", lambda: S.weighted_grads("x", data(), [1.0] * 8), "model", "str"),
    bad("scaling.weighted_grads", "data 'x'", lambda: S.weighted_grads(al.mlp(), "x", [1.0] * 8), "data", "str"),
    bad("scaling.weighted_grads", "5 features into a 4-feature model", lambda: S.weighted_grads(al.mlp(), data(features=5), [1.0] * 8), "(8, 5)"),
    bad("scaling.mean_loss", "model 'x'", lambda: S.mean_loss("x", data()), "model", "str"),
    bad("scaling.mean_loss", "data 'x'", lambda: S.mean_loss(al.mlp(), "x"), "data", "str"),
    bad("scaling.mean_loss", "y (8,) against an output (8, 1)", lambda: S.mean_loss(al.mlp(), al.Data(data().x, data().y[:, 0])), "(8, 1)", "(8,)"),
    bad("scaling.mean_loss", "5 features into a 4-feature model", lambda: S.mean_loss(al.mlp(), data(features=5)), "(8, 5)"),
    bad("scaling.mean_loss", "nan in y", lambda: S.mean_loss(al.mlp(), al.Data(data().x, data().y * NAN)), "data.y", "nan"),
    bad("scaling.epoch_grads", "trace 'x'", lambda: S.epoch_grads("x"), "trace", "str"),
    bad("scaling.update_of", "trace 'x'", lambda: S.update_of("x"), "trace", "str"),
    handled("scaling.update_of", "a trace without optimizer steps changed nothing", lambda: S.update_of(al.run(al.Recipe(2), al.mlp(), data(), optimizer=None)), lambda u: all(not t.any() for t in u.values())),
    bad("scaling.logged_losses", "trace 'x'", lambda: S.logged_losses("x"), "trace", "str"),
    bad("scaling.logged_losses", "trace {}", lambda: S.logged_losses({}), "trace", "dict"),
    bad("scaling.scale_grads", "factor nan", lambda: S.scale_grads({"w": torch.ones(2)}, NAN), "factor"),
    bad("scaling.scale_grads", "factor inf", lambda: S.scale_grads({"w": torch.ones(2)}, INF), "factor", "inf"),
    bad("scaling.scale_grads", "factor '2'", lambda: S.scale_grads({"w": torch.ones(2)}, "2"), "factor", "'2'"),
    bad("scaling.scale_grads", "grads 'x'", lambda: S.scale_grads("x", 2.0), "grads", "str"),
    bad("scaling.scale_grads", "a gradient a list", lambda: S.scale_grads({"w": [1.0]}, 2.0), "grads['w']", "list"),
    handled("scaling.scale_grads", "a negative factor", lambda: S.scale_grads({"w": torch.ones(2)}, -0.5), lambda g: g["w"].tolist() == [-0.5, -0.5]),
    bad("scaling.window_errors", "recipe 'x'", lambda: S.window_errors("x", al.mlp(), data()), "recipe", "str"),
    bad("scaling.window_errors", "model 'x'", lambda: S.window_errors(al.Recipe(2), "x", data()), "model", "str"),
    bad("scaling.window_errors", "data 'x'", lambda: S.window_errors(al.Recipe(2), al.mlp(), "x"), "data", "str"),
    bad("scaling.window_errors", "loss 'MSE'", lambda: S.window_errors(al.Recipe(2), al.mlp(), data(), loss="MSE"), "loss", "'MSE'"),
    bad("scaling.effective_batch_size", "ranks=0", lambda: S.effective_batch_size(4, 2, 0), "ranks"),
    bad("scaling.effective_batch_size", "micro_batch_size '4'", lambda: S.effective_batch_size("4", 2), "micro_batch_size", "'4'"),
    bad("scaling.linear_scaled_lr", "base_batch=0", lambda: S.linear_scaled_lr(0.1, 0, 8), "base_batch"),
    bad("scaling.linear_scaled_lr", "base_lr=nan", lambda: S.linear_scaled_lr(NAN, 4, 8), "base_lr"),
    bad("scaling.linear_scaling_gap", "lrs 'abc'", lambda: S.linear_scaling_gap(al.mlp(), data(), 2, 2, "abc"), "lrs", "str"),
    bad("scaling.linear_scaling_gap", "lrs []", lambda: S.linear_scaling_gap(al.mlp(), data(), 2, 2, []), "lrs"),
    bad("scaling.linear_scaling_gap", "lrs [nan]", lambda: S.linear_scaling_gap(al.mlp(), data(), 2, 2, [NAN]), "lrs[0]", "nan"),
    bad("scaling.linear_scaling_gap", "lrs [0.1] * 10**6", lambda: S.linear_scaling_gap(al.mlp(), data(), 2, 2, [0.1] * 10**6), "lrs"),
    bad("scaling.linear_scaling_gap", "model 'x'", lambda: S.linear_scaling_gap("x", data(), 2, 2, [0.1]), "model", "str"),
    bad("scaling.linear_scaling_gap", "data 'x'", lambda: S.linear_scaling_gap(al.mlp(), "x", 2, 2, [0.1]), "data", "str"),
    bad("scaling.linear_scaling_gap", "window larger than the data", lambda: S.linear_scaling_gap(al.mlp(), data(), 4, 4, [0.1]), "16", "8"),
    # division.py
    bad("scaling.forgotten_division", "optimizer 'Adam'", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, optimizer="Adam"), "optimizer", "'adam'"),
    bad("scaling.forgotten_division", "lr=nan", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, lr=NAN), "lr", "nan"),
    bad("scaling.forgotten_division", "model 'x'", lambda: S.forgotten_division("x", data(), 2, 2), "model", "str"),
    bad("scaling.forgotten_division", "epochs=10**9", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, epochs=10**9), "epochs"),
    bad("scaling.forgotten_division", "weight_decay=-1", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, weight_decay=-1.0), "weight_decay", "-1"),
    bad("scaling.step_every_kth", "epochs=10**9", lambda: S.step_every_kth(al.mlp(), data(), 2, 2, epochs=10**9), "epochs"),
    bad("scaling.step_every_kth", "lr=nan", lambda: S.step_every_kth(al.mlp(), data(), 2, 2, lr=NAN), "lr", "nan"),
    bad("scaling.step_every_kth", "model 'x'", lambda: S.step_every_kth("x", data(), 2, 2), "model", "str"),
    bad("scaling.step_every_kth", "data 'x'", lambda: S.step_every_kth(al.mlp(), "x", 2, 2), "data", "str"),
    bad("scaling.step_every_kth", "micro_batch_size=0", lambda: S.step_every_kth(al.mlp(), data(), 0, 2), "micro_batch_size", "0"),
    bad("scaling.step_every_kth", "y (8,) against an output (8, 1)", lambda: S.step_every_kth(al.mlp(), al.Data(data().x, data().y[:, 0]), 2, 2), "(2, 1)", "(2,)"),
    bad("scaling.step_every_kth", "5 features into a 4-feature model", lambda: S.step_every_kth(al.mlp(), data(features=5), 2, 2), "(2, 5)"),
    bad("scaling.with_params", "params 'x'", lambda: S.with_params(al.mlp(), "x"), "params", "str"),
    bad("scaling.with_params", "model 'x'", lambda: S.with_params("x", {}), "model", "str"),
    bad("scaling.with_params", "a parameter of the wrong shape", lambda: S.with_params(al.mlp(), {n: torch.zeros(1) for n, _ in al.mlp().named_parameters()}), "params", "(1,)"),
    bad("scaling.with_params", "a parameter a list", lambda: S.with_params(al.mlp(), {n: p.tolist() for n, p in al.mlp().named_parameters()}), "params", "list"),
    bad("scaling.with_params", "a parameter with nan", lambda: S.with_params(al.mlp(), {n: p.detach() * NAN for n, p in al.mlp().named_parameters()}), "params", "nan"),
    bad("scaling.forgotten_division", "momentum=1.5", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, momentum=1.5), "momentum", "1.5"),
    bad("scaling.forgotten_division", "momentum 'high'", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, momentum="high"), "momentum", "'high'"),
    bad("scaling.forgotten_division", "dampening=nan", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, momentum=0.9, dampening=NAN), "dampening", "nan"),
    bad("scaling.forgotten_division", "nesterov 'yes'", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, momentum=0.9, nesterov="yes"), "nesterov", "'yes'"),
    bad("scaling.forgotten_division", "nesterov without momentum", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, nesterov=True), "nesterov", "momentum=0.0"),
    bad("scaling.forgotten_division", "momentum with adam", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, optimizer="adam", momentum=0.9), "momentum", "'adam'"),
    handled("scaling.forgotten_division", "accumulation_steps np.int64(2)", lambda: S.forgotten_division(al.mlp(), data(), 2, np.int64(2)), lambda r: set(r["vs"]) == set(S.CANDIDATES)),
    bad("scaling.forgotten_division", "eps with sgd", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, eps=1e-4), "eps", "'sgd'"),
    bad("scaling.forgotten_division", "eps=0", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, optimizer="adamw", eps=0.0), "eps", "0"),
    bad("scaling.forgotten_division", "eps=nan", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, optimizer="adam", eps=NAN), "eps", "nan"),
    bad("scaling.forgotten_division", "eps '1e-4'", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, optimizer="adam", eps="1e-4"), "eps", "'1e-4'"),
    handled("scaling.forgotten_division", "eps np.float64(1e-6) with adamw", lambda: S.forgotten_division(al.mlp(), data(), 2, 2, optimizer="adamw", eps=np.float64(1e-6)), lambda r: set(r["vs"]) == set(S.CANDIDATES)),
    bad("scaling.multiple_of", "grads 'x'", lambda: S.multiple_of("x", _grads()), "grads", "str"),
    bad("scaling.multiple_of", "reference {}", lambda: S.multiple_of(_grads(), {}), "reference"),
    bad("scaling.multiple_of", "other parameter names", lambda: S.multiple_of({"w": torch.ones(2)}, {"v": torch.ones(2)}), "same parameters", "'v'"),
    bad("scaling.multiple_of", "shapes differ", lambda: S.multiple_of({"w": torch.ones(2)}, {"w": torch.ones(3)}), "grads['w']", "(3,)"),
    bad("scaling.multiple_of", "nan in grads", lambda: S.multiple_of({"w": torch.full((2,), NAN)}, {"w": torch.ones(2)}), "grads['w']", "nan"),
    bad("scaling.multiple_of", "inf in reference", lambda: S.multiple_of({"w": torch.ones(2)}, {"w": torch.full((2,), INF)}), "reference['w']", "inf"),
    bad("scaling.multiple_of", "a zero reference", lambda: S.multiple_of({"w": torch.ones(2)}, {"w": torch.zeros(2)}), "reference", "zero"),
    bad("scaling.multiple_of", "a gradient a list", lambda: S.multiple_of({"w": [1.0]}, {"w": torch.ones(1)}), "grads['w']", "list"),
    handled("scaling.multiple_of", "zero grads: factor 0", lambda: S.multiple_of({"w": torch.zeros(2)}, {"w": torch.ones(2)}), lambda m: m.factor == 0.0 and m.residual == 0.0),
    handled("scaling.multiple_of", "integer tensors", lambda: S.multiple_of({"w": torch.tensor([2, 4])}, {"w": torch.tensor([1, 2])}), lambda m: m.factor == 2.0 and m.residual == 0.0),
    # variance.py
    bad("scaling.gradient_variance", "draws=10**9", lambda: S.gradient_variance(al.mlp(), data(), 2, 2, draws=10**9), "draws"),
    bad("scaling.gradient_variance", "draws=1", lambda: S.gradient_variance(al.mlp(), data(), 2, 2, draws=1), "draws", "1"),
    bad("scaling.gradient_variance", "seed=2**70", lambda: S.gradient_variance(al.mlp(), data(), 2, 2, seed=2**70), "seed"),
    bad("scaling.gradient_variance", "model 'x'", lambda: S.gradient_variance("x", data(), 2, 2, draws=2), "model", "str"),
    bad("scaling.gradient_variance", "data 'x'", lambda: S.gradient_variance(al.mlp(), "x", 2, 2, draws=2), "data", "str"),
    bad("scaling.gradient_variance", "micro_batch_size 2.0", lambda: S.gradient_variance(al.mlp(), data(), 2.0, 2, draws=2), "micro_batch_size", "2.0"),
    # tokens.py
    bad("scaling.combined_loss", "tokens and means of different lengths", lambda: S.combined_loss([1, 2], [1.0]), "tokens", "means"),
    bad("scaling.combined_loss", "tokens [0, 0]", lambda: S.combined_loss([0, 0], [1.0, 2.0]), "tokens"),
    bad("scaling.combined_loss", "means [nan]", lambda: S.combined_loss([3], [NAN]), "means"),
    bad("scaling.combined_loss", "means 'ab'", lambda: S.combined_loss([1, 2], "ab"), "means", "str"),
    bad("scaling.combined_loss", "normalization 'x'", lambda: S.combined_loss([1, 2], [1.0, 2.0], "x"), "normalization", "'x'"),
    bad("scaling.token_weights", "lengths 'abc'", lambda: S.token_weights("abc"), "lengths", "str"),
    bad("scaling.token_weights", "lengths [10**9]", lambda: S.token_weights([10**9]), "lengths"),
    bad("scaling.token_weights", "lengths [1] * 10**7", lambda: S.token_weights([1] * 10**7), "lengths"),
    bad("scaling.token_weights", "accumulation_steps=0", lambda: S.token_weights([2, 3], accumulation_steps=0), "accumulation_steps", "0"),
    handled("scaling.token_weights", "a sequence without tokens under global", lambda: S.token_weights([0, 3], "global"), lambda w: w[0].tolist() == [0.0] * 3 and w[1].tolist() == [1 / 3] * 3),
    bad("scaling.per_token", "lengths with a 0", lambda: S.per_token(torch.ones(2), [3, 0]), "lengths"),
    bad("scaling.per_token", "per_sample shorter than lengths", lambda: S.per_token(torch.ones(1), [3, 2]), "per_sample", "lengths"),
    bad("scaling.per_token", "per_sample longer than lengths", lambda: S.per_token(torch.ones(3), [3, 2]), "per_sample", "lengths"),
    bad("scaling.per_token", "per_sample 'ab'", lambda: S.per_token("ab", [3, 2]), "per_sample", "str"),
    bad("scaling.per_token", "per_sample [nan, 1]", lambda: S.per_token([NAN, 1.0], [3, 2]), "per_sample", "nan"),
    bad("scaling.per_token", "lengths [10**9]", lambda: S.per_token([1.0], [10**9]), "lengths"),
    bad("scaling.rank_slices", "ranks=0", lambda: S.rank_slices(data(), 0), "ranks"),
    bad("scaling.rank_slices", "ranks=100", lambda: S.rank_slices(data(), 100), "ranks"),
    bad("scaling.rank_slices", "data 'x'", lambda: S.rank_slices("x", 2), "data", "str"),
    bad("scaling.simulated_ranks_grads", "token_count 'Global'", lambda: S.simulated_ranks_grads(_lm(), _tokens(), 2, token_count="Global"), "token_count", "'global'"),
    bad("scaling.simulated_ranks_grads", "model 'x'", lambda: S.simulated_ranks_grads("x", _tokens(), 2), "model", "str"),
    bad("scaling.simulated_ranks_grads", "ranks=3 does not divide 4", lambda: S.simulated_ranks_grads(_lm(), _tokens(), 3), "ranks", "3"),
    bad("scaling.simulated_ranks_grads", "regression data with cross_entropy", lambda: S.simulated_ranks_grads(al.mlp(), data(), 2), "cross_entropy"),
    bad("scaling.simulated_ranks_grads", "tokens past the vocabulary", lambda: S.simulated_ranks_grads(al.TinyLM(vocab=4, dim=4), _tokens(), 2), "data"),
    handled("scaling.token_weights", "lengths a numpy array", lambda: S.token_weights(np.array([3, 4])), lambda w: _equal(w, S.token_weights([3, 4]))),
    handled("scaling.token_weights", "lengths 0-d tensors and numpy ints", lambda: S.token_weights([torch.tensor(3), np.int64(4)]), lambda w: _equal(w, S.token_weights([3, 4]))),
    handled("scaling.token_weights", "micro_batch_size np.int64(1)", lambda: S.token_weights([3, 4], micro_batch_size=np.int64(1)), lambda w: _equal(w, S.token_weights([3, 4]))),
    bad("scaling.token_weights", "lengths [True, 2]", lambda: S.token_weights([True, 2]), "lengths[0]", "True"),
    bad("scaling.token_weights", "lengths [np.float64(3.0)]", lambda: S.token_weights([np.float64(3.0)]), "lengths[0]", "3.0"),
    handled("scaling.combined_loss", "numpy tokens and means", lambda: S.combined_loss(np.array([10, 90]), np.array([1.0, 2.0])), lambda v: abs(v - 1.9) < 1e-12),
    handled("scaling.effective_weights", "counts a numpy array", lambda: S.effective_weights(np.array([1, 2]), al.Recipe(1)), lambda w: w.counts.tolist() == [1, 2]),
    handled("scaling.per_token", "lengths a numpy array", lambda: S.per_token([1.0, 2.0], np.array([1, 2])), lambda t: t.tolist() == [[1.0, 0.0], [2.0, 2.0]]),
    handled("scaling.rank_slices", "ranks np.int64(2)", lambda: S.rank_slices(data(), np.int64(2)), lambda s: [len(p) for p in s] == [4, 4]),
    handled("scaling.sample_weights", "n np.int64(8)", lambda: S.sample_weights(np.int64(8), 2, 2), lambda w: w.per_item.shape == (8,)),
    handled("scaling.effective_batch_size", "np.int64 arguments", lambda: S.effective_batch_size(np.int64(4), np.int64(2)), lambda b: b == 8),
    # training.py
    bad("scaling.token_training", "model 'x'", lambda: S.token_training("x", _tokens(), 1, 2), "model", "str"),
    bad("scaling.token_training", "data 'x'", lambda: S.token_training(_lm(), "x", 1, 2), "data", "str"),
    bad("scaling.token_training", "epochs=0", lambda: S.token_training(_lm(), _tokens(), 1, 2, epochs=0), "epochs", "0"),
    bad("scaling.token_training", "epochs=10**9", lambda: S.token_training(_lm(), _tokens(), 1, 2, epochs=10**9), "epochs"),
    bad("scaling.token_training", "accumulation_steps 2.0", lambda: S.token_training(_lm(), _tokens(), 1, 2.0), "accumulation_steps", "2.0"),
    bad("scaling.token_training", "lr=nan", lambda: S.token_training(_lm(), _tokens(), 1, 2, epochs=1, lr=NAN), "lr", "nan"),
    bad("scaling.token_training", "optimizer 'Adam'", lambda: S.token_training(_lm(), _tokens(), 1, 2, epochs=1, optimizer="Adam"), "optimizer", "'Adam'"),
    bad("scaling.token_training", "regression data", lambda: S.token_training(al.mlp(), data(), 2, 2, epochs=1), "cross_entropy"),
    bad("scaling.token_training", "micro_batch_size above the sequences", lambda: S.token_training(_lm(), _tokens(), 5, 1, epochs=1), "micro_batch_size", "5"),
    bad("scaling.token_training", "a sequence without tokens in a micro-batch of one", lambda: S.token_training(_lm(), al.token_data(lengths=[0, 3], vocab=8), 1, 2, epochs=1), "zero real items"),
    handled("scaling.token_training", "np.int64 sizes, one epoch", lambda: S.token_training(_lm(), _tokens(), np.int64(1), np.int64(2), epochs=np.int64(1)), lambda c: c["epoch"] == [0, 1] and all(len(c[w]) == 2 for w in S.TRAINING_WAYS)),
    bad("scaling.unpadded", "data 'x'", lambda: S.unpadded("x"), "data", "str"),
    bad("scaling.unpadded", "regression data", lambda: S.unpadded(data()), "token data"),
    handled("scaling.unpadded", "a sequence without tokens", lambda: S.unpadded(al.token_data(lengths=[0, 2], vocab=8)), lambda s: [len(x) for x, _ in s] == [0, 2]),
    # plots.py
    bad("scaling.plot_sample_weights", "weights {}", lambda: S.plot_sample_weights({}), "weights"),
    bad("scaling.plot_sample_weights", "weights a Weights", lambda: S.plot_sample_weights(S.sample_weights(8, 2, 2)), "weights", "Weights"),
    bad("scaling.plot_sample_weights", "weights {'a': 'x'}", lambda: S.plot_sample_weights({"a": "x"}), "weights['a']", "str"),
    bad("scaling.plot_sample_weights", "title 5", lambda: S.plot_sample_weights(_weights(), title=5), "title", "5"),
    bad("scaling.plot_token_weights", "panels {}", lambda: S.plot_token_weights({}, [2, 3]), "panels"),
    bad("scaling.plot_token_weights", "lengths 'ab'", lambda: S.plot_token_weights(_panels(), "ab"), "lengths", "str"),
    bad("scaling.plot_token_weights", "lengths of other sequences", lambda: S.plot_token_weights(_panels(), [2, 3, 4]), "lengths", "(2, 3)"),
    bad("scaling.plot_token_weights", "a panel a list", lambda: S.plot_token_weights({"a": [[1.0]]}, [1]), "panels['a']", "list"),
    bad("scaling.plot_token_weights", "micro_batch_size=0", lambda: S.plot_token_weights(_panels(), [2, 3], micro_batch_size=0), "micro_batch_size", "0"),
    bad("scaling.plot_token_weights", "a panel with nan", lambda: S.plot_token_weights({"a": torch.full((2, 3), NAN, dtype=torch.float64)}, [2, 3]), "panels['a']", "nan"),
    bad("scaling.plot_window_errors", "checks []", lambda: S.plot_window_errors([]), "checks"),
    bad("scaling.plot_window_errors", "checks 'x'", lambda: S.plot_window_errors("x"), "checks", "str"),
    bad("scaling.plot_window_errors", "a check a dict", lambda: S.plot_window_errors([{"window": 0}]), "checks[0]", "dict"),
    bad("scaling.plot_linear_scaling_gap", "rows []", lambda: S.plot_linear_scaling_gap([]), "rows"),
    bad("scaling.plot_linear_scaling_gap", "a row missing relative_gap", lambda: S.plot_linear_scaling_gap([{"lr": 0.1}]), "rows[0]", "relative_gap"),
    bad("scaling.plot_linear_scaling_gap", "lr=0 on a log axis", lambda: S.plot_linear_scaling_gap([{"lr": 0.0, "gap": 1.0, "step": 1.0, "relative_gap": 1.0}]), "lr", "0"),
    bad("scaling.plot_token_training", "curves {}", lambda: S.plot_token_training({}), "curves"),
    bad("scaling.plot_token_training", "curves 'x'", lambda: S.plot_token_training("x"), "curves", "str"),
    bad("scaling.plot_token_training", "a way missing", lambda: S.plot_token_training({"epoch": [0], "full batch": [1.0]}), "curves", "global count"),
    bad("scaling.plot_token_training", "a NaN loss", lambda: S.plot_token_training(_curves(**{"mean of means": [2.0, NAN]})), "mean of means", "nan"),
    bad("scaling.plot_token_training", "curves of different lengths", lambda: S.plot_token_training(_curves(**{"global count": [2.0]})), "global count"),
    bad("scaling.plot_token_training", "title 5", lambda: S.plot_token_training(_curves(), title=5), "title", "5"),
    handled("scaling.plot_token_training", "a hand-built result", lambda: S.plot_token_training(_curves()), lambda f: isinstance(f, Figure)),
    bad("scaling.plot_scaling_explorer", "data {}", lambda: S.plot_scaling_explorer({}), "data"),
    bad("scaling.plot_scaling_explorer", "data 'x'", lambda: S.plot_scaling_explorer("x"), "data", "str"),
    bad("scaling.update_scaling_explorer", "data {}", lambda: S.update_scaling_explorer(Figure(), {}), "data"),
    bad("scaling.update_scaling_explorer", "a figure plot_scaling_explorer did not build", lambda: S.update_scaling_explorer(Figure(), S.loss_scaling_data()), "fig", "no artist named"),
    # explorer.py
    handled("scaling.loss_scaling_data", "spread np.int64(2)", lambda: S.loss_scaling_data(spread=np.int64(2)), lambda d: d["lengths"] == S.loss_scaling_data(spread=2)["lengths"]),
    bad("scaling.loss_scaling_data", "spread True", lambda: S.loss_scaling_data(spread=True), "spread", "True"),
    bad("scaling.loss_scaling_data", "spread=10**9", lambda: S.loss_scaling_data(spread=10**9), "spread"),
    bad("scaling.loss_scaling_data", "micro_batch_size=0", lambda: S.loss_scaling_data(0), "micro_batch_size", "0"),
    bad("scaling.loss_scaling_data", "micro_batch_size=21 above the 20 sequences", lambda: S.loss_scaling_data(21), "micro_batch_size", "21"),
    bad("scaling.loss_scaling_data", "normalization 'Mean'", lambda: S.loss_scaling_data(normalization="Mean"), "normalization", "'mean'"),
    bad("scaling.loss_scaling_data", "seed=-1", lambda: S.loss_scaling_data(seed=-1), "seed", "-1"),
    bad("scaling.loss_scaling_data", "last_window 'drop' dropping every window", lambda: S.loss_scaling_data(10, 3, last_window="drop"), "last_window", "drop"),
    handled("scaling.gradient_variance", "seed as a numpy integer", lambda: S.gradient_variance(al.mlp(), data(), 2, 2, draws=4, seed=np.int64(1)), lambda r: isinstance(r, dict)),
    handled("scaling.effective_batch_size", "0-d tensors give a Python int", lambda: S.effective_batch_size(torch.tensor(2), torch.tensor(3)), lambda n: type(n) is int and n == 6),
    bad("scaling.effective_batch_size", "micro_batch_size [2]", lambda: S.effective_batch_size(torch.tensor([2]), 3), "micro_batch_size"),
    bad("scaling.effective_batch_size", "a bool tensor", lambda: S.effective_batch_size(torch.tensor(True), 3), "micro_batch_size", "True"),
    bad("scaling.linear_scaled_lr", "an lr that overflows", lambda: S.linear_scaled_lr(1e308, 1, 10), "base_lr", "overflows"),
    bad("scaling.Weights.matches_reference", "rtol=nan", lambda: S.sample_weights(8, 2, 2).matches_reference(NAN), "rtol", "nan"),
]
# fmt: on
