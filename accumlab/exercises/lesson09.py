"""Lesson 09 exercises: losses and state that couple samples."""

from __future__ import annotations

import copy

import torch

from . import exercise

# 09.1: the old EMA's share per optimizer step must be KEPT, with K updates per step
KEPT, K = 0.9, 16
DIGITS = 4  # significant digits asked for: relative tolerance 5e-5


def _number(answer) -> float | None:
    """A real number as people type it: int, float, a numpy scalar or a 0-d tensor."""
    import numbers

    if isinstance(answer, bool):
        return None
    if isinstance(answer, torch.Tensor):
        return float(answer) if answer.numel() == 1 and not answer.is_complex() else None
    if isinstance(answer, numbers.Real):
        return float(answer)
    return None


@exercise("09.1", 1, "Which β keeps 0.9 of the old EMA per optimizer step, at 16 updates per step?")
def ema_decay(answer):
    value = _number(answer)
    if value is None or value != value:
        return f"answer with one number (β), got {type(answer).__name__}"
    right = KEPT ** (1 / K)
    if abs(value - right) <= 0.5 * 10**-DIGITS * abs(right):
        return None
    if abs(value - KEPT) <= 1e-6:
        return f"with β = {KEPT} each update keeps {KEPT}, so {K} updates keep {KEPT}^{K}"
    if abs(value - (1 - (1 - KEPT) / K)) <= 1e-6:
        return f"the shares multiply, they do not add: β^{K} must equal {KEPT}"
    if abs(value - KEPT**K) <= 1e-6:
        return f"that is what survives when β = {KEPT}; you want the β whose {K}th power is {KEPT}"
    if abs(value - right) <= 1e-2 * right:
        return f"close — give {DIGITS} significant digits"
    return f"each update keeps a share β of the EMA it finds, and the loop makes {K} of them"


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
    from ..coupling.contrastive import contrastive_loss, encoder, info_nce, pair_data, pair_inputs
    from ..coupling.principle import batch_loss_grads
    from ..engine import grads_of
    from ..saved import LiveSavedTensors, saved_tensor_bytes

    if not callable(answer):
        return "answer must be a function gradcache_step(model, data, micro_batch_size)"
    data, model, mb = pair_data(32, seed=1), encoder(seed=1), 8
    expected = batch_loss_grads(model, data, contrastive_loss)
    learner = copy.deepcopy(model)
    first = next(m for m in learner.modules() if not list(m.children()))  # the first layer
    rows = []  # rows the first layer saw in each forward WITH a graph (a loop over the layers too)

    def watch(_module, args):
        if torch.is_grad_enabled():
            rows.append(len(args[0]))

    # what one chunk's encoder graph and the loss over all embeddings keep for backward
    chunk = saved_tensor_bytes(
        lambda: learner(pair_inputs(data[:mb])), exclude=learner.parameters()
    )
    with torch.no_grad():
        z = learner(pair_inputs(data))
    q, k = (t.clone().requires_grad_() for t in (z[: len(data)], z[len(data) :]))
    loss_graph = saved_tensor_bytes(lambda: info_nce(q, k))
    handle = first.register_forward_pre_hook(watch)
    try:
        with LiveSavedTensors(exclude=learner.parameters()) as live:
            answer(learner, data, mb)
    finally:
        handle.remove()
    if any(p.grad is None for p in learner.parameters()):
        return "after your step every parameter needs a .grad: backpropagate the cached gradients"
    if rows and max(rows) > 2 * mb:
        return (
            f"a forward with a graph ran {max(rows)} rows through the first layer; embed the "
            f"whole batch under torch.no_grad() and re-run one micro-batch ({2 * mb} rows: "
            f"{mb} anchors, {mb} positives) at a time"
        )
    if live.peak > loss_graph + 2 * chunk:
        return (
            f"at one moment autograd held {live.peak:,} bytes for backward: about "
            f"{round((live.peak - loss_graph) / chunk)} micro-batches' graphs alive at once "
            "(one micro-batch's graph is about "
            f"{chunk:,} bytes). Pass 1 keeps no graph; pass 2 backpropagates each micro-batch "
            "before the next forward"
        )
    if grad_diff(grads_of(learner), expected).max_rel > 1e-10:
        return (
            "the gradient differs from the big batch's (tolerance: relative 1e-10): the loss "
            "must be computed ONCE over all cached embeddings (every negative), and each "
            "micro-batch must backpropagate its rows of d loss / d embedding"
        )
    return None
