"""One number per coupling for the explorer: how far naive accumulation lands from the big batch,
and how far the fix lands, for a micro-batch size and k (lesson 09)."""

from __future__ import annotations

from functools import cache

import torch

from .._threads import one_thread
from .._validate import one_of, positive_int
from ..compare import grad_diff
from ..models import mlp
from . import aggregation, contrastive, dpsgd, ema, gradcache, router
from .principle import batch_loss_grads, naive_accumulated_grads

WINDOW = 128  # most samples one optimizer step may hold here (micro-batch size × k)
EMA_STEPS = 4  # optimizer steps the EMA comparison runs
TOKENS = tuple(router.ORDERS)  # the aux_loss window's token order

# coupling -> (what naive accumulation does, what the fix does)
COUPLINGS = {
    "contrastive": ("InfoNCE per micro-batch", "GradCache"),
    "ema": ("EMA updated every micro-step", "EMA updated once per step"),
    "aux_loss": ("load-balancing loss per micro-batch", "global routing counts"),
    # not an accumulation gap: clipping a summed gradient is the wrong algorithm for DP-SGD, wrong
    # even at k = 1 (one micro-batch); the fix is per-sample clipping, accumulated
    "clipping": ("clip each micro-batch's sum (not DP-SGD's clipping)", "clip each sample"),
    "aggregation": ("token mean per micro-batch", "token mean over the whole step"),
}

# what each coupling's window holds (micro_batch_size × k samples, one optimizer step)
DATA = {
    "contrastive": "the first mb × k of 128 pairs (pair_data), §2's encoder",
    "ema": f"{EMA_STEPS} optimizer steps of mb × k regression samples; the EMA after the last",
    "aux_loss": "mb × k tokens of 4 topics (router_data), §4's router",
    "clipping": "the first mb × k of 128 regression samples; C = their median gradient norm",
    "aggregation": "the first mb × k of 128 completions (rl_batch), one rank",
}


@cache
def _setup(coupling: str):
    """Data and model per coupling, built once: a slider move only recomputes gradients."""
    if coupling == "contrastive":
        return contrastive.pair_data(WINDOW), contrastive.encoder()
    if coupling == "ema":
        from ..data import regression_data

        return regression_data(WINDOW * EMA_STEPS, 4, seed=0), mlp(4, 16, 1, seed=0)
    if coupling == "aux_loss":
        return None, router.router_model()  # the tokens: _tokens(window, order)
    if coupling == "clipping":
        from ..data import regression_data

        return regression_data(WINDOW, 4, seed=0), mlp(4, 16, 1, seed=0)
    data, advantages = aggregation.rl_batch(WINDOW)
    return (data, advantages), aggregation.policy()


@cache
def _tokens(window: int, order: str):
    """`window` tokens of all 4 topics, sorted by topic or shuffled: §4's data at this size (the
    first tokens of one sorted set of 128 would hold a single topic)."""
    return router.router_data(window, grouped=router.ORDERS[order], seed=0)


def _rel(a, b) -> float:
    return grad_diff(a, b).rel_l2


@cache
def _clipped_reference(window: int) -> tuple[float, dict]:
    """(C, DP-SGD's clipped gradient) over the first `window` samples, written out sample by
    sample: one autograd.grad each, its norm over all parameters, scaled by min(1, C / norm),
    summed, ÷ N. Shares no code with `dpsgd.clipped_grads`, whose fix it judges; C is the
    median of these norms (torch's lower median, as `dpsgd.median_grad_norm`)."""
    data, model = _setup("clipping")
    data, params = data[:window], list(model.parameters())
    rows = []
    for x, y in zip(data.x, data.y, strict=True):
        loss = torch.nn.functional.mse_loss(model(x[None]), y[None], reduction="sum")
        rows.append(torch.autograd.grad(loss, params))
    norms = torch.stack([torch.cat([g.reshape(-1) for g in row]).norm() for row in rows])
    clip = float(norms.median())
    total = [
        sum(min(1.0, clip / float(n)) * row[i] for row, n in zip(rows, norms))
        for i in range(len(params))
    ]
    names = [n for n, _ in model.named_parameters()]
    return clip, {n: t / window for n, t in zip(names, total, strict=True)}


@cache
def _token_mean_reference(window: int) -> dict:
    """The step's token mean over the first `window` completions as one loss and one backward:
    every token's loss summed ÷ the step's token count, without `aggregated_grads`."""
    from .principle import batch_loss_grads

    (completions, advantages), model = _setup("aggregation")
    completions, advantages = completions[:window], advantages[:window]
    tokens = completions.lengths().sum()

    def loss(net, batch):
        return aggregation.token_losses(net, batch, advantages).sum() / tokens

    return batch_loss_grads(model, completions, loss)


@cache
def _big_ema(window: int):
    """The big batch's EMA after EMA_STEPS steps of `window` samples (the same for every k)."""
    data, model = _setup("ema")
    return ema.ema_run(model, data[: window * EMA_STEPS], window, 1)["ema"][-1]


def _ema_gaps(data, model, mb: int, k: int) -> tuple[float, float]:
    data = data[: mb * k * EMA_STEPS]
    big = _big_ema(mb * k)
    runs = ema.ema_runs(model, data, mb, k)  # one training run, both EMAs
    gaps = [runs[p]["ema"][-1] for p in ("micro_step", "optimizer_step")]
    return tuple(float((g - big).norm() / big.norm()) for g in gaps)


@one_thread()
def coupling_gaps(
    coupling: str, micro_batch_size: int, accumulation_steps: int, tokens: str = TOKENS[0]
) -> dict:
    """Relative L2 gap to the big batch (micro_batch_size × k samples in one piece) of naive
    accumulation and of the fix (clipping and aggregation: to a reference written out without
    the function the fix runs), for one coupling of COUPLINGS: gradients of one step, or for
    "ema" the EMA weights after EMA_STEPS steps. For "aux_loss" also running counts' gap
    ("running"; None for the others), on tokens in the order `tokens` (TOKENS). What each
    window holds: DATA. Drives lesson 09's explorer."""
    one_of("coupling", coupling, COUPLINGS)
    one_of("tokens", tokens, TOKENS)
    mb = positive_int("micro_batch_size", micro_batch_size)
    k = positive_int("accumulation_steps", accumulation_steps)
    if mb * k > WINDOW:
        raise ValueError(
            f"micro_batch_size × accumulation_steps must be at most {WINDOW}, got {mb * k}"
        )
    data, model = _setup(coupling)
    running = None
    if coupling == "contrastive":
        window = data[: mb * k]
        big = batch_loss_grads(model, window, contrastive.contrastive_loss)
        naive = _rel(naive_accumulated_grads(model, window, mb, contrastive.contrastive_loss), big)
        fix = _rel(gradcache.gradcache_grads(model, window, mb)["grads"], big)
    elif coupling == "ema":
        naive, fix = _ema_gaps(data, model, mb, k)
    elif coupling == "aux_loss":
        window = _tokens(mb * k, tokens)
        big = router.aux_loss_grads(model, window, mb * k, "full")["grads"]
        naive = _rel(router.aux_loss_grads(model, window, mb, "per_micro_batch")["grads"], big)
        running = _rel(router.aux_loss_grads(model, window, mb, "running_counts")["grads"], big)
        fix = _rel(router.aux_loss_grads(model, window, mb, "global_counts")["grads"], big)
    elif coupling == "clipping":
        window = data[: mb * k]
        clip, big = _clipped_reference(mb * k)  # written out sample by sample
        naive = _rel(dpsgd.clipped_grads(model, window, mb, clip, "micro_batch"), big)
        fix = _rel(dpsgd.clipped_grads(model, window, mb, clip, "per_sample"), big)
    else:
        (completions, advantages), window = data, slice(0, mb * k)
        completions, advantages = completions[window], advantages[window]

        def grads(aggregation_name, size):
            return aggregation.aggregated_grads(
                model, completions, advantages, aggregation=aggregation_name, micro_batch_size=size
            )

        big = _token_mean_reference(mb * k)  # one loss over the whole step, one backward
        naive = _rel(grads("token_mean_local", mb), big)
        fix = _rel(grads("token_mean_global", mb), big)
    naive_label, fix_label = COUPLINGS[coupling]
    return {
        "coupling": coupling,
        "micro_batch_size": mb,
        "accumulation_steps": k,
        "tokens": tokens,
        "naive": naive,
        "running": running,
        "fix": fix,
        "naive_label": naive_label,
        "fix_label": fix_label,
        "data": DATA[coupling],
    }
