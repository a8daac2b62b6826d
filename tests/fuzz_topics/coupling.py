"""Lesson 09 (al.coupling): bad inputs and what each must do."""

from __future__ import annotations

import numpy as np
import torch
from fuzz_harness import bad, handled
from matplotlib.figure import Figure

import accumlab as al

from . import INF, NAN, data

C = al.coupling


def _pairs():
    return C.pair_data(8, 4)


def _enc():
    return C.encoder(4, 4)


def _learned():
    return C.encoder(4, 4, learnable_temperature=True)


def _rl():
    return C.rl_batch(8)


def _agg(**kw):
    tokens, adv = _rl()
    kw = {"aggregation": "seq_mean", "micro_batch_size": 2, **kw}
    return C.aggregated_grads(C.policy(), kw.pop("data", tokens), kw.pop("advantages", adv), **kw)


def _mse(model, batch):
    return C.mse_loss(model, batch)


def _nan_data(n=8, features=4):
    d = data(n, features)
    x = d.x.clone()
    x[1, 0] = NAN
    return al.Data(x, d.y)


def _nan_pairs():
    p = _pairs()
    x = p.x.clone()
    x[0, 0] = NAN
    return al.Data(x, p.y)


def _finite_dict(grads):
    return isinstance(grads, dict) and all(bool(torch.isfinite(g).all()) for g in grads.values())


# fmt: off
CASES = [
    # principle.py
    bad("coupling.batch_loss_grads", "batch_loss 'mse'", lambda: C.batch_loss_grads(al.mlp(), data(), "mse"), "batch_loss", "'mse'"),
    bad("coupling.batch_loss_grads", "batch_loss returns a float", lambda: C.batch_loss_grads(al.mlp(), data(), lambda m, b: 1.0), "batch_loss", "float"),
    bad("coupling.batch_loss_grads", "batch_loss returns a vector", lambda: C.batch_loss_grads(al.mlp(), data(), lambda m, b: m(b.x)), "batch_loss", "(8, 1)"),
    bad("coupling.batch_loss_grads", "model 'x'", lambda: C.batch_loss_grads("x", data(), _mse), "model", "str"),
    bad("coupling.batch_loss_grads", "nan in x", lambda: C.batch_loss_grads(al.mlp(), al.Data(data().x * NAN, data().y), _mse), "data.x", "nan"),
    bad("coupling.naive_accumulated_grads", "micro_batch_size=0", lambda: C.naive_accumulated_grads(al.mlp(), data(), 0, _mse), "micro_batch_size", "0"),
    bad("coupling.naive_accumulated_grads", "data 'x'", lambda: C.naive_accumulated_grads(al.mlp(), "x", 2, _mse), "data", "str"),
    bad("coupling.accumulation_gap", "batch_loss 5", lambda: C.accumulation_gap(al.mlp(), data(), 2, 5), "batch_loss", "5"),
    bad("coupling.accumulation_gap", "micro_batch_size=10**9", lambda: C.accumulation_gap(al.mlp(), data(), 10**9, _mse), "micro_batch_size"),
    bad("coupling.mse_loss", "model 'x'", lambda: C.mse_loss("x", data()), "model", "str"),
    bad("coupling.mse_loss", "batch 'x'", lambda: C.mse_loss(al.mlp(), "x"), "batch", "str"),
    bad("coupling.mse_loss", "y (8,) against an output (8, 1)", lambda: C.mse_loss(al.mlp(), al.Data(data().x, data().y[:, 0])), "(8, 1)", "(8,)"),
    # contrastive.py, gradcache.py
    bad("coupling.pair_data", "n=1", lambda: C.pair_data(1), "n", "1"),
    bad("coupling.pair_data", "n=10**10", lambda: C.pair_data(10**10), "n"),
    bad("coupling.pair_data", "dtype int64", lambda: C.pair_data(dtype=torch.int64), "dtype", "int64"),
    bad("coupling.pair_data", "noise=nan", lambda: C.pair_data(noise=NAN), "noise", "nan"),
    bad("coupling.pair_data", "seed=-1", lambda: C.pair_data(seed=-1), "seed", "-1"),
    bad("coupling.encoder", "dim=0", lambda: C.encoder(dim=0), "dim", "0"),
    bad("coupling.encoder", "dropout=1.5", lambda: C.encoder(dropout=1.5), "dropout", "1.5"),
    bad("coupling.info_nce", "shapes differ", lambda: C.info_nce(torch.ones(4, 2), torch.ones(3, 2)), "q", "k", "(4, 2)", "(3, 2)"),
    bad("coupling.info_nce", "temperature=0", lambda: C.info_nce(torch.ones(4, 2), torch.ones(4, 2), 0), "temperature", "0"),
    bad("coupling.info_nce", "nan in q", lambda: C.info_nce(torch.full((4, 2), NAN), torch.ones(4, 2)), "q", "nan"),
    bad("coupling.pair_inputs", "batch 'x'", lambda: C.pair_inputs("x"), "batch", "str"),
    bad("coupling.contrastive_loss", "model 'x'", lambda: C.contrastive_loss("x", _pairs()), "model", "str"),
    bad("coupling.contrastive_loss", "batch 'x'", lambda: C.contrastive_loss(_enc(), "x"), "batch", "str"),
    bad("coupling.contrastive_loss", "temperature=inf", lambda: C.contrastive_loss(_enc(), _pairs(), INF), "temperature", "inf"),
    bad("coupling.contrastive_loss", "8 features into a 4-feature encoder", lambda: C.contrastive_loss(_enc(), C.pair_data(8, 8)), "(16, 8)"),
    bad("coupling.chance_loss", "n=0", lambda: C.chance_loss(0), "n", "0"),
    bad("coupling.chance_loss", "n=10**10", lambda: C.chance_loss(10**10), "n"),
    bad("coupling.contrastive_sweep", "sizes '8'", lambda: C.contrastive_sweep(_enc(), _pairs(), "8"), "sizes", "str"),
    bad("coupling.contrastive_sweep", "sizes [0]", lambda: C.contrastive_sweep(_enc(), _pairs(), [0]), "sizes", "0"),
    bad("coupling.contrastive_sweep", "temperature=-1", lambda: C.contrastive_sweep(_enc(), _pairs(), [2], -1.0), "temperature", "-1"),
    bad("coupling.gradcache_grads", "replay_rng 'yes'", lambda: C.gradcache_grads(_enc(), _pairs(), 2, replay_rng="yes"), "replay_rng", "'yes'"),
    bad("coupling.gradcache_grads", "micro_batch_size=0", lambda: C.gradcache_grads(_enc(), _pairs(), 0), "micro_batch_size", "0"),
    bad("coupling.gradcache_grads", "seed=2**70", lambda: C.gradcache_grads(_enc(), _pairs(), 2, seed=2**70), "seed"),
    bad("coupling.same_masks_reference", "temperature=nan", lambda: C.same_masks_reference(_enc(), _pairs(), 2, temperature=NAN), "temperature", "nan"),
    bad("coupling.same_masks_reference", "model 'x'", lambda: C.same_masks_reference("x", _pairs(), 2), "model", "str"),
    bad("coupling.cached_negatives_grads", "data 'x'", lambda: C.cached_negatives_grads(_enc(), "x", 2), "data", "str"),
    bad("coupling.cached_negatives_grads", "seed=-1", lambda: C.cached_negatives_grads(_enc(), _pairs(), 2, seed=-1), "seed", "-1"),
    bad("coupling.encoder_saved_bytes", "batch 'x'", lambda: C.encoder_saved_bytes(_enc(), "x"), "batch", "str"),
    bad("coupling.encoder_saved_bytes", "model 'x'", lambda: C.encoder_saved_bytes("x", _pairs()), "model", "str"),
    # ema.py
    bad("coupling.ema_run", "beta=1.0", lambda: C.ema_run(al.mlp(), data(), 2, 2, beta=1.0), "beta", "1.0"),
    bad("coupling.ema_run", "beta=nan", lambda: C.ema_run(al.mlp(), data(), 2, 2, beta=NAN), "beta", "nan"),
    bad("coupling.ema_run", "placement 'micro'", lambda: C.ema_run(al.mlp(), data(), 2, 2, placement="micro"), "placement", "'micro'"),
    bad("coupling.ema_run", "lr=nan", lambda: C.ema_run(al.mlp(), data(), 2, 2, lr=NAN), "lr", "nan"),
    bad("coupling.ema_run", "data not a multiple of the window", lambda: C.ema_run(al.mlp(), data(), 3, 2), "micro_batch_size", "3"),
    bad("coupling.ema_run", "model 'x'", lambda: C.ema_run("x", data(), 2, 2), "model", "str"),
    bad("coupling.ema_old_weight", "accumulation_steps=0", lambda: C.ema_old_weight(al.mlp(), data(), 2, 0), "accumulation_steps", "0"),
    bad("coupling.ema_old_weight", "beta=-0.5", lambda: C.ema_old_weight(al.mlp(), data(), 2, 2, beta=-0.5), "beta", "-0.5"),
    bad("coupling.ema_horizon", "old_weight=1.0", lambda: C.ema_horizon(1.0), "old_weight", "1.0"),
    bad("coupling.ema_horizon", "old_weight '0.5'", lambda: C.ema_horizon("0.5"), "old_weight", "'0.5'"),
    bad("coupling.accelerate_ema_updates", "gated 'yes'", lambda: C.accelerate_ema_updates(2, 4, gated="yes"), "gated", "'yes'"),
    bad("coupling.accelerate_ema_updates", "micro_steps=10**9", lambda: C.accelerate_ema_updates(2, 10**9, gated=True), "micro_steps"),
    bad("coupling.accelerate_ema_updates", "accumulation_steps=0", lambda: C.accelerate_ema_updates(0, 4, gated=True), "accumulation_steps", "0"),
    # router.py
    bad("coupling.router_data", "experts=1", lambda: C.router_data(experts=1), "experts", "1"),
    bad("coupling.router_data", "grouped 'no'", lambda: C.router_data(grouped="no"), "grouped", "'no'"),
    bad("coupling.router_data", "n=10**11", lambda: C.router_data(10**11), "n"),
    bad("coupling.router_model", "experts=1", lambda: C.router_model(experts=1), "experts", "1"),
    bad("coupling.router_model", "features=0", lambda: C.router_model(0), "features", "0"),
    bad("coupling.routed_fractions", "'x'", lambda: C.routed_fractions("x"), "logits", "'x'"),
    bad("coupling.load_balance_loss", "logits 1-d", lambda: C.load_balance_loss(torch.ones(4)), "logits", "(4,)"),
    bad("coupling.load_balance_loss", "total=0", lambda: C.load_balance_loss(torch.ones(4, 2), total=0), "total", "0"),
    bad("coupling.load_balance_loss", "fractions of 3 experts for 2", lambda: C.load_balance_loss(torch.ones(4, 2), torch.ones(3)), "fractions", "(3,)"),
    bad("coupling.aux_loss_grads", "mode 'Full'", lambda: C.aux_loss_grads(C.router_model(), C.router_data(16), 4, "Full"), "mode", "'full'"),
    bad("coupling.aux_loss_grads", "model 'x'", lambda: C.aux_loss_grads("x", C.router_data(16), 4, "full"), "model", "str"),
    bad("coupling.aux_loss_grads", "micro_batch_size=0", lambda: C.aux_loss_grads(C.router_model(), C.router_data(16), 0, "per_micro_batch"), "micro_batch_size", "0"),
    # dpsgd.py
    bad("coupling.per_sample_grads", "model 'x'", lambda: C.per_sample_grads("x", data()), "model", "str"),
    bad("coupling.per_sample_grads", "class labels", lambda: C.per_sample_grads(al.mlp(8, 16, 3), al.classification_data(8)), "data.y", "int64"),
    bad("coupling.per_sample_grads", "5 features into a 4-feature model", lambda: C.per_sample_grads(al.mlp(4), data(features=5)), "(8, 5)"),
    bad("coupling.clipped_grads", "mode 'sample'", lambda: C.clipped_grads(al.mlp(), data(), 2, 1.0, "sample"), "mode", "'sample'"),
    bad("coupling.clipped_grads", "clip_norm=nan", lambda: C.clipped_grads(al.mlp(), data(), 2, NAN, "window"), "clip_norm", "nan"),
    bad("coupling.clipped_grads", "data 'x'", lambda: C.clipped_grads(al.mlp(), "x", 2, 1.0, "window"), "data", "str"),
    bad("coupling.clip_fraction", "clip_norm=-1", lambda: C.clip_fraction(al.mlp(), data(), -1.0), "clip_norm", "-1"),
    bad("coupling.clip_fraction", "model None", lambda: C.clip_fraction(None, data(), 1.0), "model", "NoneType"),
    bad("coupling.median_grad_norm", "data 'x'", lambda: C.median_grad_norm(al.mlp(), "x"), "data", "str"),
    # in_backward.py
    bad("coupling.fused_optimizer_window", "gate 'first'", lambda: C.fused_optimizer_window(al.mlp(), data(), 2, gate="first"), "gate", "'first'"),
    bad("coupling.fused_optimizer_window", "optimizer 'Adam'", lambda: C.fused_optimizer_window(al.mlp(), data(), 2, optimizer="Adam"), "optimizer", "'adam'"),
    bad("coupling.fused_optimizer_window", "lr=nan", lambda: C.fused_optimizer_window(al.mlp(), data(), 2, lr=NAN), "lr", "nan"),
    bad("coupling.accumulate_then_step", "optimizer 'Adam'", lambda: C.accumulate_then_step(al.mlp(), data(), 2, optimizer="Adam"), "optimizer", "'adam'"),
    bad("coupling.accumulate_then_step", "model 'x'", lambda: C.accumulate_then_step("x", data(), 2), "model", "str"),
    bad("coupling.update_length", "different names", lambda: C.update_length({"w": torch.ones(1)}, {"v": torch.ones(1)}), "after", "before"),
    bad("coupling.update_length", "a value 'x'", lambda: C.update_length({"w": "x"}, {"w": torch.ones(1)}), "after", "'w'"),
    bad("coupling.update_length", "shapes differ", lambda: C.update_length({"w": torch.ones(2)}, {"w": torch.ones(3)}), "'w'", "(2,)", "(3,)"),
    # aggregation.py
    bad("coupling.rl_batch", "n=1", lambda: C.rl_batch(1), "n", "1"),
    bad("coupling.rl_batch", "min_len > max_len", lambda: C.rl_batch(min_len=5, max_len=3), "min_len", "max_len"),
    bad("coupling.policy", "vocab=0", lambda: C.policy(0), "vocab", "0"),
    bad("coupling.token_losses", "advantages of the wrong length", lambda: C.token_losses(C.policy(), _rl()[0], torch.ones(3)), "advantages", "(3,)"),
    bad("coupling.token_losses", "model 'x'", lambda: C.token_losses("x", *_rl()), "model", "str"),
    bad("coupling.token_losses", "batch 'x'", lambda: C.token_losses(C.policy(), "x", torch.ones(3)), "batch", "str"),
    bad("coupling.aggregated_grads", "aggregation 'token_mean'", lambda: _agg(aggregation="token_mean"), "aggregation", "'token_mean'"),
    bad("coupling.aggregated_grads", "order not a permutation", lambda: _agg(order=torch.zeros(8, dtype=torch.long)), "order"),
    bad("coupling.aggregated_grads", "ranks=3 does not divide 8", lambda: _agg(ranks=3), "ranks", "3"),
    bad("coupling.aggregated_grads", "regression data", lambda: _agg(data=data(), advantages=torch.ones(8)), "data"),
    bad("coupling.aggregated_grads", "advantages [nan]", lambda: _agg(advantages=torch.full((8,), NAN)), "advantages", "nan"),
    bad("coupling.partition_gaps", "partitions=0", lambda: C.partition_gaps(C.policy(), *_rl(), aggregation="seq_mean", micro_batch_size=2, partitions=0), "partitions", "0"),
    bad("coupling.partition_gaps", "partitions=10**9", lambda: C.partition_gaps(C.policy(), *_rl(), aggregation="seq_mean", micro_batch_size=2, partitions=10**9), "partitions"),
    bad("coupling.partition_gaps", "aggregation 'x'", lambda: C.partition_gaps(C.policy(), *_rl(), aggregation="x", micro_batch_size=2), "aggregation", "'x'"),
    # gaps.py, explorer.py, plots.py
    bad("coupling.coupling_gaps", "coupling 'Contrastive'", lambda: C.coupling_gaps("Contrastive", 2, 2), "coupling", "'contrastive'"),
    bad("coupling.coupling_gaps", "window above 128", lambda: C.coupling_gaps("ema", 64, 4), "micro_batch_size", "accumulation_steps"),
    bad("coupling.explore_coupling", "coupling 'x'", lambda: C.explore_coupling("x"), "coupling", "'x'"),
    bad("coupling.explore_coupling", "micro_batch_size=0", lambda: C.explore_coupling(micro_batch_size=0), "micro_batch_size", "0"),
    bad("coupling.plot_gaps", "gaps {}", lambda: C.plot_gaps({}), "gaps"),
    bad("coupling.plot_gaps", "gaps {'a': nan}", lambda: C.plot_gaps({"a": NAN}), "gaps", "nan"),
    bad("coupling.plot_gaps", "gaps [1.0]", lambda: C.plot_gaps([1.0]), "gaps", "list"),
    bad("coupling.plot_contrastive_sweep", "sweep {}", lambda: C.plot_contrastive_sweep({}), "sweep"),
    bad("coupling.plot_ema", "gaps {}", lambda: C.plot_ema([1, 2], {}), "gaps"),
    bad("coupling.plot_ema", "steps and gaps of different lengths", lambda: C.plot_ema([1, 2], {"a": [0.1]}), "steps", "gaps"),
    bad("coupling.plot_gap_sweep", "curves {}", lambda: C.plot_gap_sweep([1, 2], {}), "curves"),
    bad("coupling.plot_gap_sweep", "sizes 'ab'", lambda: C.plot_gap_sweep("ab", {"a": [0.1, 0.2]}), "sizes", "str"),
    bad("coupling.plot_partition_gaps", "gaps {}", lambda: C.plot_partition_gaps({}), "gaps"),
    bad("coupling.plot_partition_gaps", "a gap list empty", lambda: C.plot_partition_gaps({"a": []}), "gaps"),
    bad("coupling.plot_coupling_explorer", "data {}", lambda: C.plot_coupling_explorer({}), "data"),
    bad("coupling.update_coupling_figure", "fig 'x'", lambda: C.update_coupling_figure("x", C.explore_coupling()), "fig", "str"),
    bad("coupling.update_coupling_figure", "a figure it did not build", lambda: C.update_coupling_figure(Figure(), C.explore_coupling()), "fig"),
    bad("coupling.update_coupling_figure", "data {}", lambda: C.update_coupling_figure(C.plot_coupling_explorer(C.explore_coupling()), {}), "data"),
    bad("coupling.coupling_caption", "data {}", lambda: C.coupling_caption({}), "data"),
    bad("coupling.coupling_caption", "data 'x'", lambda: C.coupling_caption("x"), "data", "str"),
    # the cases the older topics have: NaN and inf in data, numbers as numpy or 0-d tensors
    bad("coupling.load_balance_loss", "a NaN logit", lambda: C.load_balance_loss(torch.tensor([[0.0, NAN], [1.0, 0.0]])), "logits", "nan"),
    bad("coupling.load_balance_loss", "an inf logit", lambda: C.load_balance_loss(torch.tensor([[0.0, INF], [1.0, 0.0]])), "logits", "inf"),
    bad("coupling.load_balance_loss", "NaN fractions", lambda: C.load_balance_loss(torch.zeros(4, 2), torch.tensor([NAN, 0.5])), "fractions", "nan"),
    bad("coupling.load_balance_loss", "integer logits", lambda: C.load_balance_loss(torch.zeros(4, 2, dtype=torch.long)), "logits", "int64"),
    bad("coupling.routed_fractions", "a NaN logit", lambda: C.routed_fractions(torch.tensor([[0.0, NAN]])), "logits", "nan"),
    bad("coupling.contrastive_sweep", "sizes [1]: no negatives, a 0/0 cosine", lambda: C.contrastive_sweep(_enc(), _pairs(), [1]), "sizes[0]", "1"),
    bad("coupling.contrastive_sweep", "nan in the pairs", lambda: C.contrastive_sweep(_enc(), _nan_pairs(), [2]), "nan"),
    bad("coupling.gradcache_grads", "nan in the pairs", lambda: C.gradcache_grads(_enc(), _nan_pairs(), 2), "data", "nan"),
    bad("coupling.cached_negatives_grads", "replay_rng 1", lambda: C.cached_negatives_grads(_enc(), _pairs(), 2, replay_rng=1), "replay_rng", "1"),
    bad("coupling.cached_negatives_grads", "micro_batch_size=0", lambda: C.cached_negatives_grads(_enc(), _pairs(), 0), "micro_batch_size", "0"),
    bad("coupling.encoder", "norm 'bn'", lambda: C.encoder(norm="bn"), "norm", "'bn'"),
    bad("coupling.ema_run", "nan in x", lambda: C.ema_run(al.mlp(), _nan_data(), 2, 2), "data", "nan"),
    bad("coupling.ema_old_weight", "data 'x'", lambda: C.ema_old_weight(al.mlp(), "x", 2, 2), "data", "str"),
    bad("coupling.ema_horizon", "old_weight nan", lambda: C.ema_horizon(NAN), "old_weight", "nan"),
    bad("coupling.accelerate_ema_updates", "beta=1.5", lambda: C.accelerate_ema_updates(2, 4, gated=True, beta=1.5), "beta", "1.5"),
    bad("coupling.aux_loss_grads", "mode 'running'", lambda: C.aux_loss_grads(C.router_model(), C.router_data(16), 4, "running"), "mode", "'running'"),
    bad("coupling.aux_loss_grads", "nan in x", lambda: C.aux_loss_grads(C.router_model(), al.Data(C.router_data(16).x * NAN, C.router_data(16).y), 4, "full"), "data", "nan"),
    bad("coupling.clipped_grads", "noise_multiplier=-1", lambda: C.clipped_grads(al.mlp(), data(), 2, 1.0, "per_sample", noise_multiplier=-1.0), "noise_multiplier", "-1"),
    bad("coupling.clipped_grads", "noise_multiplier=inf", lambda: C.clipped_grads(al.mlp(), data(), 2, 1.0, "per_sample", noise_multiplier=INF), "noise_multiplier", "inf"),
    bad("coupling.clipped_grads", "seed=-1", lambda: C.clipped_grads(al.mlp(), data(), 2, 1.0, "per_sample", seed=-1), "seed", "-1"),
    bad("coupling.clipped_grads", "nan in x", lambda: C.clipped_grads(al.mlp(), _nan_data(), 2, 1.0, "window"), "data", "nan"),
    bad("coupling.per_sample_grads", "nan in x", lambda: C.per_sample_grads(al.mlp(), _nan_data()), "data", "nan"),
    bad("coupling.fused_optimizer_window", "nan in x", lambda: C.fused_optimizer_window(al.mlp(), _nan_data(), 2), "data", "nan"),
    bad("coupling.fused_optimizer_window", "micro_batch_size=0", lambda: C.fused_optimizer_window(al.mlp(), data(), 0), "micro_batch_size", "0"),
    bad("coupling.update_length", "an empty dict", lambda: C.update_length({}, {}), "after"),
    bad("coupling.token_losses", "advantages [inf]", lambda: C.token_losses(C.policy(), _rl()[0], torch.full((8,), INF)), "advantages", "inf"),
    bad("coupling.aggregated_grads", "micro_batch_size=0", lambda: _agg(micro_batch_size=0), "micro_batch_size", "0"),
    bad("coupling.aggregated_grads", "max_len=0", lambda: _agg(max_len=0), "max_len", "0"),
    bad("coupling.plot_gap_sweep", "a NaN gap", lambda: C.plot_gap_sweep([1, 2], {"a": [0.1, NAN]}), "curves", "nan"),
    bad("coupling.plot_ema", "an inf gap", lambda: C.plot_ema([1, 2], {"a": [0.1, INF]}), "gaps", "inf"),
    bad("coupling.plot_partition_gaps", "a NaN gap", lambda: C.plot_partition_gaps({"a": [NAN]}), "gaps", "nan"),
    bad("coupling.plot_contrastive_sweep", "a NaN cosine", lambda: C.plot_contrastive_sweep({"sizes": [2], "cosine": [NAN], "loss": [0.5], "chance": [0.69]}), "sweep", "nan"),
    bad("coupling.plot_contrastive_sweep", "no logged loss", lambda: C.plot_contrastive_sweep({"sizes": [2], "cosine": [0.9], "chance": [0.69]}), "sweep", "loss"),
    bad("coupling.plot_contrastive_sweep", "a loss per size missing", lambda: C.plot_contrastive_sweep({"sizes": [2, 4], "cosine": [0.9, 0.8], "loss": [0.5], "chance": [0.69, 1.39]}), "loss", "2"),
    # a learnable temperature, saved bytes per pass, running counts, the seed sweep
    bad("coupling.encoder", "hidden=0", lambda: C.encoder(hidden=0), "hidden", "0"),
    bad("coupling.encoder", "learnable_temperature 'yes'", lambda: C.encoder(learnable_temperature="yes"), "learnable_temperature", "'yes'"),
    bad("coupling.info_nce", "logit_scale of shape (2,)", lambda: C.info_nce(torch.ones(4, 2), torch.ones(4, 2), logit_scale=torch.ones(2)), "logit_scale", "(2,)"),
    bad("coupling.info_nce", "logit_scale nan", lambda: C.info_nce(torch.ones(4, 2), torch.ones(4, 2), logit_scale=torch.tensor(NAN)), "logit_scale", "nan"),
    bad("coupling.info_nce", "logit_scale 2.0 (a float)", lambda: C.info_nce(torch.ones(4, 2), torch.ones(4, 2), logit_scale=2.0), "logit_scale", "float"),
    bad("coupling.cached_negatives_grads", "temperature_once 1", lambda: C.cached_negatives_grads(_enc(), _pairs(), 2, temperature_once=1), "temperature_once", "1"),
    bad("coupling.cached_negatives_grads", "divide_loss 'yes'", lambda: C.cached_negatives_grads(_enc(), _pairs(), 2, divide_loss="yes"), "divide_loss", "'yes'"),
    bad("coupling.temperature_training", "a fixed temperature", lambda: C.temperature_training(_enc(), _pairs(), 2), "model", "logit_scale"),
    bad("coupling.temperature_training", "steps=0", lambda: C.temperature_training(_learned(), _pairs(), 2, steps=0), "steps", "0"),
    bad("coupling.temperature_training", "steps=10**9", lambda: C.temperature_training(_learned(), _pairs(), 2, steps=10**9), "steps", "1000000000"),
    bad("coupling.temperature_training", "lr NaN", lambda: C.temperature_training(_learned(), _pairs(), 2, lr=NAN), "lr", "nan"),
    bad("coupling.temperature_training", "optimizer 'lbfgs'", lambda: C.temperature_training(_learned(), _pairs(), 2, optimizer="lbfgs"), "optimizer", "'lbfgs'"),
    bad("coupling.temperature_training", "micro_batch_size=9 of 8", lambda: C.temperature_training(_learned(), _pairs(), 9, steps=1), "micro_batch_size", "9"),
    bad("coupling.temperature_training", "max_norm=-1", lambda: C.temperature_training(_learned(), _pairs(), 2, max_norm=-1.0), "max_norm", "-1"),
    bad("coupling.temperature_training", "data 'x'", lambda: C.temperature_training(_learned(), "x", 2), "data", "str"),
    handled("coupling.temperature_training", "steps as a numpy integer", lambda: C.temperature_training(_learned(), _pairs(), 4, steps=np.int64(1)), lambda r: all(np.isfinite(g) for g in r["gaps"].values())),
    bad("coupling.ema_runs", "placements 'micro_step' (a string)", lambda: C.ema_runs(al.mlp(), data(), 2, 2, placements="micro_step"), "placements", "str"),
    bad("coupling.ema_runs", "placements ['micro']", lambda: C.ema_runs(al.mlp(), data(), 2, 2, placements=["micro"]), "placements[0]", "'micro'"),
    bad("coupling.ema_runs", "model 'x'", lambda: C.ema_runs("x", data(), 2, 2), "model", "str"),
    bad("coupling.aux_loss_sweep", "sizes [0]", lambda: C.aux_loss_sweep([0], [0], n=16), "sizes[0]", "0"),
    bad("coupling.aux_loss_sweep", "sizes larger than n", lambda: C.aux_loss_sweep([32], [0], n=16), "sizes[0]", "32"),
    bad("coupling.aux_loss_sweep", "seeds [-1]", lambda: C.aux_loss_sweep([8], [-1], n=16), "seeds[0]", "-1"),
    bad("coupling.aux_loss_sweep", "seeds 'ab'", lambda: C.aux_loss_sweep([8], "ab", n=16), "seeds", "str"),
    bad("coupling.aux_loss_sweep", "modes ['full']", lambda: C.aux_loss_sweep([8], [0], n=16, modes=["full"]), "modes[0]", "'full'"),
    bad("coupling.aux_loss_sweep", "n=1", lambda: C.aux_loss_sweep([1], [0], n=1), "n", "1"),
    bad("coupling.aux_loss_sweep", "millions of micro-batches", lambda: C.aux_loss_sweep([1], list(range(5000)), n=128), "seeds", "1,000,000"),
    bad("coupling.term_errors", "result {}", lambda: C.term_errors({}, C.aux_loss_grads(C.router_model(), C.router_data(16), 4, "global_counts")), "result", "parts"),
    bad("coupling.term_errors", "different splits", lambda: C.term_errors(C.aux_loss_grads(C.router_model(), C.router_data(16), 8, "running_counts"), C.aux_loss_grads(C.router_model(), C.router_data(16), 4, "global_counts")), "micro-batches", "2", "4"),
    bad("coupling.plot_aux_sweep", "sweep {}", lambda: C.plot_aux_sweep({}), "sweep"),
    bad("coupling.plot_aux_sweep", "a NaN gap", lambda: C.plot_aux_sweep({"window": 16, "sizes": [8], "seeds": [0], "gaps": {"shuffled": {"per_micro_batch": [[NAN]]}}}), "sweep", "nan"),
    bad("coupling.plot_aux_sweep", "one curve for two seeds", lambda: C.plot_aux_sweep({"window": 16, "sizes": [8], "seeds": [0, 1], "gaps": {"shuffled": {"per_micro_batch": [[0.1]]}}}), "sweep", "seed"),
    bad("coupling.coupling_gaps", "tokens 'sorted'", lambda: C.coupling_gaps("aux_loss", 2, 2, "sorted"), "tokens", "'sorted'"),
    bad("coupling.explore_coupling", "tokens 'x'", lambda: C.explore_coupling(tokens="x"), "tokens", "'x'"),
    bad("coupling.logit_scale_ratio", "grads without logit_scale", lambda: C.logit_scale_ratio({"w": torch.ones(2)}, {"w": torch.ones(2), "logit_scale": torch.tensor(1.0)}), "grads", "logit_scale"),
    bad("coupling.logit_scale_ratio", "grads {}", lambda: C.logit_scale_ratio({}, {"logit_scale": torch.tensor(1.0)}), "grads"),
    bad("coupling.logit_scale_ratio", "a reference gradient of 0", lambda: C.logit_scale_ratio({"w": torch.ones(2), "logit_scale": torch.tensor(1.0)}, {"w": torch.ones(2), "logit_scale": torch.tensor(0.0)}), "reference", "0"),
    bad("coupling.logit_scale_ratio", "other parameter names", lambda: C.logit_scale_ratio({"v": torch.ones(2), "logit_scale": torch.tensor(1.0)}, {"w": torch.ones(2), "logit_scale": torch.tensor(1.0)}), "grads", "reference"),
    handled("coupling.logit_scale_of", "an encoder with a fixed temperature", lambda: C.logit_scale_of(C.encoder()), lambda s: s is None),
    handled("coupling.logit_scale_of", "open_clip's learnable logit_scale", lambda: C.logit_scale_of(C.encoder(learnable_temperature=True)), lambda s: abs(float(s.detach()) - 2.302585) < 1e-6),
    handled("coupling.aux_loss_sweep", "sizes and seeds as numpy integers", lambda: C.aux_loss_sweep(np.array([8]), [np.int64(0)], n=16, modes=["global_counts"]), lambda r: max(r["gaps"]["shuffled"]["global_counts"][0]) <= 1e-12),
    handled("coupling.term_errors", "a result against itself", lambda: C.term_errors(*[C.aux_loss_grads(C.router_model(), C.router_data(16), 4, "global_counts")] * 2), lambda r: r["kept"] == 0.0 and max(r["per_term"]) == 0.0),
    handled("coupling.coupling_gaps", "micro-batches of 1, k = 16", lambda: C.coupling_gaps("clipping", 1, 16), lambda r: r["naive"] <= 1e-12 and r["running"] is None),
    handled("coupling.pair_data", "n as a numpy integer", lambda: C.pair_data(np.int64(8), 4), lambda d: len(d) == 8),
    handled("coupling.pair_data", "n as a 0-d tensor", lambda: C.pair_data(torch.tensor(8), 4), lambda d: len(d) == 8),
    handled("coupling.explore_coupling", "sizes as numpy integers", lambda: C.explore_coupling("ema", np.int64(8), np.int64(2)), lambda d: [r["micro_batch_size"] for r in d["rows"]] == [8]),
    handled("coupling.ema_horizon", "old_weight as a numpy float", lambda: C.ema_horizon(np.float64(0.5)), lambda h: h == 2.0),
    handled("coupling.aux_loss_grads", "running counts over one micro-batch are the global ones", lambda: C.aux_loss_grads(C.router_model(), C.router_data(16), 16, "running_counts"), lambda r: _finite_dict(r["grads"])),
    handled("coupling.clipped_grads", "a zero clip fraction stays finite", lambda: C.clipped_grads(al.mlp(), data(), 2, 1e6, "window"), _finite_dict),
    # numbers of any type reach torch and Accelerate as Python numbers (the shared rule)
    handled("coupling.ema_run", "beta as a numpy float32", lambda: C.ema_run(al.mlp(), data(), 2, 2, beta=np.float32(0.5)), lambda r: len(r["updates"]) == 2),
    handled("coupling.ema_old_weight", "beta as a 0-d tensor", lambda: C.ema_old_weight(al.mlp(), data(), 2, 2, beta=torch.tensor(0.5)), lambda w: abs(w - 0.5) < 1e-9),
    bad("coupling.ema_run", "beta True", lambda: C.ema_run(al.mlp(), data(), 2, 2, beta=True), "beta", "True"),
    handled("coupling.accelerate_ema_updates", "accumulation_steps as a 0-d tensor", lambda: C.accelerate_ema_updates(torch.tensor(2), 4, gated=True), lambda r: r["optimizer_steps"] == 2, slow=True),
    handled("coupling.clipped_grads", "seed as a numpy integer", lambda: C.clipped_grads(al.mlp(), data(), 2, 1.0, "per_sample", noise_multiplier=0.5, seed=np.int64(3)), _finite_dict),
    bad("coupling.aux_loss_grads", "micro_batch_size=4.5 in mode 'full'", lambda: C.aux_loss_grads(C.router_model(), C.router_data(16), 4.5, "full"), "micro_batch_size", "4.5"),
]
# fmt: on
