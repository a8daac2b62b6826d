"""Lesson 09 exercises: losses and state that couple samples."""

from __future__ import annotations

import copy

import torch

from . import exercise

BETA, K = 0.99, 8


def _number(answer) -> float:
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        raise ValueError(f"answer must be a number, got {type(answer).__name__}")
    return float(answer)


@exercise(
    "09.1", 1, "What share of the old EMA survives one optimizer step updated every micro-step?"
)
def ema_decay(answer):
    value = _number(answer)
    if abs(value - BETA**K) <= 1e-9:
        return None
    if abs(value - BETA) <= 1e-9:
        return "that is one update; count how many times the loop calls ema.update() per optimizer step"
    if abs(value - (1 - K * (1 - BETA))) <= 1e-9:
        return "each update multiplies the old EMA by β: the factors multiply, they do not add up"
    return (
        f"each update keeps a share β = {BETA} of the EMA it found, and there are k = {K} of them"
    )


@exercise("09.2", 1, "Which aggregations give the same gradient however the samples are split?")
def invariant_aggregations(answer):
    from ..coupling.aggregation import AGGREGATIONS

    if not isinstance(answer, (set, list, tuple)) or not all(isinstance(a, str) for a in answer):
        return f"answer with a set of names from {sorted(AGGREGATIONS)}"
    chosen = set(answer)
    unknown = chosen - set(AGGREGATIONS)
    if unknown:
        return f"unknown name(s) {sorted(unknown)}; choose from {sorted(AGGREGATIONS)}"
    right = {"seq_mean", "token_mean_global", "constant"}
    if "token_mean_local" in chosen:
        return (
            "a micro-batch's own token count changes with the split: run al.coupling.partition_gaps"
        )
    if chosen != right:
        return "one of the invariant ones is missing: each weighs every token by a factor fixed for the whole step"
    return None


def _ema_reference(model, data, micro_batch_size, k):
    from ..coupling.ema import ema_run

    return ema_run(model, data, micro_batch_size, k, beta=0.9, lr=0.05)["ema"][-1]


@exercise("09.3", 2, "Fix an EMA loop: one EMA update per optimizer step")
def ema_loop(answer):
    from ..data import regression_data
    from ..models import mlp

    if not callable(answer):
        return "answer must be a function train_window(model, micro_batches, optimizer, update_ema)"
    data, model = regression_data(64, 4, seed=2), mlp(4, 8, 1, seed=2)
    mb, k = 4, 4
    learner = copy.deepcopy(model)
    optimizer = torch.optim.SGD(learner.parameters(), lr=0.05)
    params = list(learner.parameters())
    ema = [p.detach().clone() for p in params]
    calls = []

    def update_ema():
        calls.append(1)
        with torch.no_grad():
            for e, p in zip(ema, params, strict=True):
                e.mul_(0.9).add_(p, alpha=0.1)

    micro = data.micro_batches(mb)
    for w in range(len(micro) // k):
        before = len(calls)
        answer(learner, micro[w * k : (w + 1) * k], optimizer, update_ema)
        if len(calls) - before != 1:
            return f"update_ema() ran {len(calls) - before} times in one window; it must run once, after optimizer.step()"
    got = torch.cat(
        [e.reshape(-1) for _, e in sorted(zip([n for n, _ in learner.named_parameters()], ema))]
    )
    expected = _ema_reference(model, data, mb, k)
    if (got - expected).norm() > 1e-10 * expected.norm():
        return "the EMA differs from the reference: divide each micro-batch's MSE by k, step, then update the EMA, then zero the gradients"
    return None


@exercise("09.4", 3, "Implement the two-pass GradCache step")
def gradcache_step(answer):
    from ..compare import grad_diff
    from ..coupling.contrastive import contrastive_loss, encoder, pair_data
    from ..coupling.principle import batch_loss_grads
    from ..engine import grads_of

    if not callable(answer):
        return "answer must be a function gradcache_step(model, data, micro_batch_size)"
    data, model = pair_data(32, seed=1), encoder(seed=1)
    expected = batch_loss_grads(model, data, contrastive_loss)
    learner = copy.deepcopy(model)
    seen = []  # rows each forward WITH a graph saw: pass 2 must stay at micro-batch size

    def watch(_module, args):
        if torch.is_grad_enabled():
            seen.append(len(args[0]))

    handle = learner.register_forward_pre_hook(watch)
    try:
        answer(learner, data, 8)
    finally:
        handle.remove()
    if any(p.grad is None for p in learner.parameters()):
        return "after your step every parameter needs a .grad: backpropagate the cached gradients"
    if seen and max(seen) > 16:
        return f"a forward with a graph saw {max(seen)} rows; embed the whole batch under torch.no_grad() and re-run one micro-batch (16 rows: 8 anchors, 8 positives) at a time"
    if grad_diff(grads_of(learner), expected).max_rel > 1e-10:
        return "the gradient differs from the big batch's: the loss must be computed ONCE over all cached embeddings (every negative), and each micro-batch must backpropagate its rows of d loss / d embedding"
    return None
