"""Lesson 09 exercises: losses and state that couple samples."""

from __future__ import annotations

import copy

import torch

from . import exercise
from ._answers import compare
from ._observe import Hint, Observe, Refuse, forwards_phrase

# 09.1: the old EMA's share per optimizer step must be KEPT, with K updates per step
KEPT, K = 0.9, 16
DIGITS = 4  # significant digits the exercise asks for


@exercise("09.1", 1, "Which β keeps 0.9 of the old EMA per optimizer step, at 16 updates per step?")
def ema_decay(answer):
    return compare(
        answer,
        KEPT ** (1 / K),
        sig=DIGITS,
        wrong={
            KEPT: f"with β = {KEPT} each update keeps {KEPT}, so {K} updates keep {KEPT}^{K}",
            1 - (1 - KEPT) / K: f"the shares multiply, they do not add: β^{K} must equal {KEPT}",
            KEPT
            ** K: f"that is what survives when β = {KEPT}; you want the β whose {K}th power is {KEPT}",
        },
        otherwise=f"each update keeps a share β of the EMA it finds, and the loop makes {K} of them",
    )


@exercise(
    "09.2", 1, "With micro-batches of 3 and 5 completions, which aggregations stay invariant?"
)
def invariant_aggregations(answer):
    from ..coupling.aggregation import AGGREGATIONS

    if not isinstance(answer, (set, list, tuple)) or not all(isinstance(a, str) for a in answer):
        return f"answer with a set of names from {sorted(AGGREGATIONS)}"
    chosen = set(answer)
    unknown = chosen - set(AGGREGATIONS)
    if unknown:
        return f"unknown name(s) {sorted(unknown)}; choose from {sorted(AGGREGATIONS)}"
    right = {"token_mean_global", "constant"}
    if "token_mean_local" in chosen:
        return "a micro-batch's own token count changes with the split"
    if "seq_mean" in chosen:
        return (
            "seq_mean divides each micro-batch by its own number of sequences: with 3 and 5, is "
            "a sequence's weight fixed for the step?"
        )
    if chosen != right:
        return "one is missing: which divisors are fixed for the whole step, whatever the split?"
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
    data, model, mb = pair_data(32, seed=1), encoder(seed=1), 8
    expected = batch_loss_grads(model, data, contrastive_loss)
    learner = copy.deepcopy(model)
    refused = Refuse(
        "al.coupling.gradcache_grads",
        "al.coupling.cached_negatives_grads",
        "al.coupling.same_masks_reference",
        "al.coupling.batch_loss_grads",
        "al.coupling.naive_accumulated_grads",
    )
    with refused, Observe(learner) as seen:
        answer(learner, data, mb)
    if any(p.grad is None for p in learner.parameters()):
        raise Hint(
            f"{seen.summary()}, and some parameters have no .grad: backpropagate the cached "
            "gradients through a second forward of each micro-batch"
        )
    with_graph = [c.rows for c in seen.forwards if c.graph]
    if with_graph and max(r or 0 for r in with_graph) > 2 * mb:
        raise Hint(
            f"your answer ran {forwards_phrase(with_graph)} with a graph; embed the whole batch "
            f"under torch.no_grad() and re-run one micro-batch ({2 * mb} rows: {mb} anchors, "
            f"{mb} positives) at a time"
        )
    if seen.peak_graphs > 1:
        raise Hint(
            f"{seen.summary()}: GradCache keeps one micro-batch's graph at a time — pass 1 "
            "without a graph, and in pass 2 backpropagate each micro-batch before the next forward"
        )
    if grad_diff(grads_of(learner), expected).max_rel > 1e-10:
        raise Hint(
            "the gradient differs from the big batch's (checked to a relative 1e-10): the loss "
            "must be computed ONCE over all cached embeddings (every negative), and each "
            "micro-batch must backpropagate its rows of d loss / d embedding"
        )
    return None
