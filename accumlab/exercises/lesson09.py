"""Lesson 09 exercises: losses and state that couple samples."""

from __future__ import annotations

import copy
import math

import torch

from . import exercise
from ._answers import compare
from ._backward_nodes import BackwardWalks, wide_graphs
from ._draws import pool_seed
from ._ema_judge import GradAtStep, ema_reference, flat, window_mean_grad
from ._gradcache_judge import LossCalls, allowed_bytes, from_own_backwards, loss_graphs
from ._graph_watch import OutputGradients
from ._observe import Added, Hint, Observe, Refuse, forwards_phrase, plural

# 09.1: the old EMA's share per optimizer step must be KEPT, with K updates per step
KEPT, K = 0.9, 16
# significant digits the exercise asks for: 5 tell β^16 = 0.9 (0.99344) from its first-order
# approximation 1 + ln(0.9)/16 (0.99341), and float32's 7 digits still pass
DIGITS = 5


@exercise("09.1", 1, "Which β keeps 0.9 of the old EMA per optimizer step, at 16 updates per step?")
def ema_decay(answer):
    unchanged = f"with β = {KEPT} each update keeps {KEPT}, so {K} updates keep {KEPT}^{K}"
    hint = compare(
        answer,
        KEPT ** (1 / K),
        sig=DIGITS,
        wrong={
            KEPT: unchanged,
            1 - (1 - KEPT) / K: f"the shares multiply, they do not add: β^{K} must equal {KEPT}",
            KEPT
            ** K: f"that is what survives when β = {KEPT}; you want the β whose {K}th power is {KEPT}",
            1 + math.log(KEPT) / K: f"that is the first-order approximation 1 + ln({KEPT})/{K}; "
            f"solve β^{K} = {KEPT} exactly",
            0.99: f"β = 0.99 is §3's decay: {K} updates keep 0.99^{K} ≈ {0.99**K:.3f} of the old "
            f"EMA per step, not {KEPT}",
        },
        otherwise=f"each update keeps a share β of the EMA it finds, and the loop makes {K} of them",
    )
    # 0.9 is β left as it was, not 0.99344 cut to one digit: no "if you rounded, give more digits"
    return unchanged if hint and hint.startswith(unchanged) else hint


@exercise(
    "09.2", 1, "With micro-batches of 3 and 5 completions, which aggregations stay invariant?"
)
def invariant_aggregations(answer):
    from collections.abc import Iterable, Mapping

    from ..coupling.aggregation import AGGREGATIONS

    names = sorted(AGGREGATIONS)
    if isinstance(answer, (str, bytes, Mapping)) or not isinstance(answer, Iterable):
        return f"answer with a set of names from {names}, e.g. {{'{names[0]}'}}"
    chosen = list(answer)  # a set, frozenset, list, tuple, dict.keys(), generator...
    if not all(isinstance(a, str) for a in chosen):
        return f"answer with a set of names (strings) from {names}"
    chosen = {a.strip().lower() for a in chosen}  # "Constant" and "constant " name the same
    unknown = chosen - set(AGGREGATIONS)
    if unknown:
        return f"unknown name(s) {sorted(unknown)}; choose from {names}"
    if chosen != {"token_mean_global", "constant"}:
        # one hint for every wrong set: a hint that told the names apart would let guesses walk
        # to the answer (as in 07.2)
        return (
            "not that set. For each name, write its divisor for micro-batches of 3 and of 5 "
            "completions: is it the same number for both, whatever the split?"
        )
    return None


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
    names = [n for n, _ in learner.named_parameters()]
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
        window = micro[w * k : (w + 1) * k]
        expected_grad = window_mean_grad(learner, window)
        with GradAtStep(optimizer, params) as at_step:
            answer(learner, window, optimizer, update_ema)
        updates, stepped = len(calls) - before, len(at_step.seen)
        if stepped == 0 and updates == 0:
            return (
                "not answered yet — this loop never steps the optimizer and never updates the "
                "EMA: complete train_window"
            )
        if stepped != 1:
            return (
                f"the optimizer stepped {plural(stepped, 'time')} (1 expected) in one window of {k} "
                "micro-batches"
            )
        if updates != 1:
            return (
                f"update_ema() ran {updates} times in one window of {k} micro-batches; the "
                "exercise asks for one EMA update per window"
            )
        left = [
            n for n, p in zip(names, params, strict=True) if p.grad is not None and p.grad.any()
        ]
        if left:
            return (
                f"after window {w + 1}, {len(left)} of {len(names)} parameters still hold a "
                "gradient in .grad: the exercise asks train_window to leave them zeroed for the "
                "next window (optimizer.zero_grad() after the step). Zeroing at the start of the "
                "window trains the same weights, but between windows .grad would still hold this "
                "window's gradient, for whatever reads it there (a logged norm, an evaluation's "
                "backward adding to it)"
            )
        seen = at_step.seen[0]
        if (seen - expected_grad).norm() > 1e-10 * expected_grad.norm():
            ratio = float(seen @ expected_grad / (expected_grad @ expected_grad))
            return (
                f"in window {w + 1}, .grad at optimizer.step() was not the gradient of the mean "
                f"of the window's micro-batch MSE means (it was {ratio:.3g}× it along that "
                "direction; checked to a relative 1e-10). Scaling the learning rate instead gives "
                "the same SGD step, but not with an optimizer that normalises the gradient (Adam)"
            )
    weights, expected_ema = ema_reference(model, data, mb, k)
    got = flat(dict(zip(names, (p.detach() for p in params), strict=True)))
    if (got - weights).norm() > 1e-10 * weights.norm():
        return (
            "the weights after 4 windows differ from the reference (checked to a relative 1e-10): "
            "each step must use the mean of the window's micro-batch MSE means, and the "
            "gradients must start from zero in every window"
        )
    got = flat(dict(zip(names, ema, strict=True)))
    if (got - expected_ema).norm() > 1e-10 * expected_ema.norm():
        return (
            "the weights are right but the EMA is not (checked to a relative 1e-10): which "
            "weights does your update_ema() average in, the old ones or this window's?"
        )
    return None


# 09.4 draws its data and model from these seeds: on each, every corpus answer gets its verdict and
# hint (tests/test_exercise_machinery.py)
GRADCACHE_SEEDS = tuple(range(14))


@exercise("09.4", 3, "Implement the two-pass GradCache step")
def gradcache_step(answer):
    from ..compare import grad_diff
    from ..coupling.contrastive import contrastive_loss, encoder, pair_data
    from ..coupling.principle import batch_loss_grads
    from ..engine import grads_of

    if not callable(answer):
        return "answer must be a function gradcache_step(model, data, micro_batch_size)"
    # drawn afresh for every check: a gradient computed for known data beforehand does not fit
    seed = pool_seed(GRADCACHE_SEEDS)
    data, model, mb = pair_data(32, seed=seed), encoder(seed=seed), 8
    expected = batch_loss_grads(model, data, contrastive_loss)
    allowed = allowed_bytes(model, data, mb)
    learner = copy.deepcopy(model)
    refused = Refuse(
        "al.coupling.gradcache_grads",
        "al.coupling.cached_negatives_grads",
        "al.coupling.same_masks_reference",
        "al.coupling.batch_loss_grads",
        "al.coupling.naive_accumulated_grads",
        # gradcache_grads' helpers, refused by code identity: a copy of its body calls them
        "al.coupling.gradcache._split",
        "al.coupling.gradcache._start",
        "al.coupling.gradcache._rng_state",
        "al.coupling.gradcache._replayed",
    )
    with (
        refused,
        Observe(learner) as seen,
        LossCalls() as losses,
        Added(learner) as added,
        OutputGradients(learner) as arrived,
        BackwardWalks() as walks,
    ):
        answer(learner, data, mb)
    if any(p.grad is None for p in learner.parameters()):
        raise Hint(
            f"{seen.summary()}, and some parameters have no .grad: backpropagate the cached "
            "gradients through a second forward of each micro-batch"
        )
    # a reentrant checkpoint records pass 2's graph only when backward reruns the forward
    with_graph = [c.rows or 0 for c in (*seen.forwards, *seen.recomputed) if c.graph]
    if with_graph and max(with_graph) > 2 * mb:
        raise Hint(
            f"your answer ran {forwards_phrase(with_graph)} with a graph; embed the whole batch "
            f"under torch.no_grad() and re-run one micro-batch ({2 * mb} rows: {mb} anchors, "
            f"{mb} positives) at a time"
        )
    if sum(with_graph) < 2 * len(data):
        raise Hint(
            f"your answer ran {forwards_phrase(with_graph)} of the model with a graph; pass 2 "
            f"forwards every micro-batch again through the model ({2 * len(data)} rows in all), "
            "and the check watches the model's layers"
        )
    if losses.calls > 1 and max(losses.rows) < len(data):
        raise Hint(
            f"your answer evaluated al.coupling.info_nce {losses.calls} times, each over one "
            f"micro-batch's pairs ({max(losses.rows)} rows of q): that is naive accumulation, whose "
            "negatives are only the micro-batch's. GradCache computes the loss ONCE over all "
            "cached embeddings (every negative) and keeps its gradient per embedding"
        )
    if losses.calls > 1:
        raise Hint(
            f"your answer evaluated al.coupling.info_nce with a graph {losses.calls} times: that "
            "is open_clip's loop (the whole loss once per micro-batch), exact here but not "
            "GradCache, and a learnable temperature would get k times its gradient. Compute the "
            "loss ONCE over all cached embeddings and keep its gradient per embedding"
        )
    walked = wide_graphs(walks.walks, 2 * mb, learner)
    if walked > 1:
        raise Hint(
            f"your backward passes ran through {walked} separately built graphs on more rows than "
            "one micro-batch (the loss over the whole batch, or the whole batch's encoder): "
            "GradCache builds the batch-wide loss ONCE, backpropagates it into the cached "
            "embeddings, then one micro-batch's rows at a time. Building and backpropagating the "
            "whole loss once per micro-batch is open_clip's loop, however the loss is written, "
            "checkpointed or split into two backward passes"
        )
    built, op = loss_graphs(walks.walks, arrived.passes, learner)
    if built > 1:
        raise Hint(
            f"your backward passes ran through {built} separately built graphs with a nonlinear "
            f"function of the embeddings ({op}, not in the model): a loss built and "
            "backpropagated once per micro-batch, however it is written. GradCache builds the "
            "loss ONCE over the cached embeddings; pass 2 backpropagates something linear in each "
            "micro-batch's embeddings, their dot product with the cached d loss / d embedding"
        )
    if seen.peak_rows_alive() > 2 * mb:  # one micro-batch: its anchors and positives, 2 × mb
        raise Hint(
            f"the graphs of forwards over {seen.peak_rows_alive()} rows were alive at once: pass "
            "2 backpropagates each micro-batch's graph before the next micro-batch's forward, so "
            f"one micro-batch's encoder graph ({2 * mb} rows) is alive at a time"
        )
    if seen.peak_saved_bytes > allowed["bound"]:
        raise Hint(
            f"your answer held {seen.peak_saved_bytes:,} bytes for backward at once; a GradCache "
            f"step holds one micro-batch's encoder graph ({allowed['chunk']:,}) at most, beside "
            f"the loss graph ({allowed['loss']:,}) or the cached gradients "
            f"({allowed['cached']:,}): at most {allowed['bound']:,}. Pass 1 without a graph, the "
            "loss once over the cached embeddings, and in pass 2 backpropagate each micro-batch "
            "before the next forward"
        )
    from_own_backwards(learner, added, arrived, model, data)
    if grad_diff(grads_of(learner), expected).max_rel > 1e-10:
        raise Hint(
            "the gradient differs from the big batch's (checked to a relative 1e-10): the loss "
            "must be computed ONCE over all cached embeddings (every negative), and each "
            "micro-batch must backpropagate its rows of d loss / d embedding"
        )
    return None
