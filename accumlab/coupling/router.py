"""A loss of batch statistics: the mixture-of-experts load-balancing loss (Switch Transformer:
E · Σᵢ fᵢ·Pᵢ) multiplies two averages over the batch, so its value and gradient depend on which
tokens share a micro-batch (lesson 09)."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import flag, one_of, positive_int
from ..data import Data, classification_data
from ..engine import grads_of
from ..models import mlp
from ._checks import describe, require_data, require_model

# full: the whole window at once (the reference); per_micro_batch: each micro-batch's own loss,
# averaged (what accumulation does by default); global_counts: routing counts of the whole window
# first (a graph-less routing pass over the window), then each micro-batch adds its share of
# E·Σᵢ fᵢ·Pᵢ (exact); running_counts: each micro-batch uses the counts of the micro-batches seen so
# far in the window (Megatron-LM's global_aux_loss keeps such a buffer, reset once per step) —
# exact only for the last micro-batch, no extra pass
AUX_MODES = ("full", "per_micro_batch", "global_counts", "running_counts")


def router_data(
    n: int = 128, features: int = 8, experts: int = 4, *, grouped: bool = True, seed: int = 0
) -> Data:
    """Tokens from `experts` topics. `grouped`: sorted by topic, so consecutive tokens (one
    micro-batch) mostly share a topic, as the tokens of one document do; otherwise in random
    order. y is the topic, for reference only. Lesson 09."""
    experts = positive_int(
        "experts", experts, minimum=2
    )  # checked here: classification_data says "classes"
    flag("grouped", grouped)
    data = classification_data(n, features, experts, seed=seed)
    if not grouped:
        return data
    order = torch.argsort(data.y, stable=True)
    return Data(data.x[order], data.y[order])


def router_model(features: int = 8, experts: int = 4, *, seed: int = 0) -> nn.Sequential:
    """A small router network: features → one logit per expert. Lesson 09."""
    experts = positive_int("experts", experts, minimum=2)
    return mlp(features, 16, experts, depth=1, seed=seed)


def _logits(logits) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or len(logits) == 0:
        raise ValueError(
            f"logits must be a non-empty (tokens, experts) tensor, got {describe(logits)}"
        )
    # a NaN logit makes its token's probabilities NaN, and with them the whole loss
    return _validate.tensor("logits", logits, floating=True, finite=True)


def routed_fractions(logits: torch.Tensor) -> torch.Tensor:
    """fᵢ: the share of tokens whose top-1 expert is i (a count: no gradient flows through it)."""
    _logits(logits)
    experts = logits.shape[-1]
    return F.one_hot(logits.detach().argmax(-1), experts).to(logits.dtype).mean(0)


def load_balance_loss(
    logits: torch.Tensor, fractions: torch.Tensor | None = None, total: int | None = None
) -> torch.Tensor:
    """E · Σᵢ fᵢ·Pᵢ with Pᵢ = (Σ over these tokens of the router probability of i) / total.

    Defaults: fᵢ and total from these tokens alone (the loss of this batch). Pass the whole
    window's fractions and token count to get this micro-batch's exact share of the window's loss.
    Equals 1 when routing and probabilities are uniform.
    """
    experts = _logits(logits).shape[-1]
    if fractions is None:
        fractions = routed_fractions(logits)
    elif not isinstance(fractions, torch.Tensor) or fractions.shape != (experts,):
        raise ValueError(
            f"fractions must be a tensor of shape ({experts},), got {describe(fractions)}"
        )
    else:
        _validate.tensor("fractions", fractions, floating=True, finite=True)
    total = len(logits) if total is None else positive_int("total", total)
    probs = logits.softmax(-1).sum(0) / total
    return experts * (fractions * probs).sum()


@one_thread()
def aux_loss_grads(model: nn.Module, data: Data, micro_batch_size: int, mode: str) -> dict:
    """The load-balancing loss over `data` as one optimizer step, computed as `mode` says
    (AUX_MODES), on a copy of `model`.

    Returns {"grads", "loss"}: the gradient the optimizer sees and the loss value the loop would
    log; {"parts"}: what each micro-batch's backward added to it; {"fractions"}: the routing
    shares fᵢ each micro-batch's term used, and {"window_fractions"}: the whole window's;
    {"count_error"}: max |Σ_m (len(m)/N)·(fractions_m − window fractions)|, how far the counts the
    micro-batches used are off on average over the window (0 for per-micro-batch counts, whose
    errors cancel in that sum); {"covariance"}: E·Σᵢ cov_m(fᵢ, Pᵢ), the covariance over the
    micro-batches (weighted by their tokens) of each one's own routed share and mean router
    probability of expert i — what the per-micro-batch logged loss exceeds the big batch's by.
    Lesson 09."""
    one_of("mode", mode, AUX_MODES)
    require_model(model)
    require_data(data)
    # checked in every mode: "full" ignores it, but a float or a 0 is still a typo to say
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    micro = data.micro_batches(len(data) if mode == "full" else micro_batch_size)
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    fractions = None
    if mode == "global_counts":
        # a routing pass without a graph over the whole window; in a real MoE, layer l's routing
        # depends on layers before it, so this is a full graph-less forward of the model
        with torch.no_grad():
            fractions = routed_fractions(torch.cat([model(mb.x) for mb in micro]))
    logged, counts, seen = 0.0, None, 0
    used, routed, parts, before, probs = [], [], [], None, []
    for mb in micro:
        logits = model(mb.x)
        mine = routed_fractions(logits)
        routed.append(mine * len(mb))
        probs.append(logits.detach().softmax(-1).mean(0))
        if mode == "running_counts":
            # counts of every micro-batch of this window so far, this one included
            counts = mine * len(mb) if counts is None else counts + mine * len(mb)
            seen += len(mb)
            f = counts / seen
            loss = load_balance_loss(logits, f, total=len(data))
        elif mode == "global_counts":
            f = fractions
            loss = load_balance_loss(logits, f, total=len(data))  # a share: just add
        else:
            f = mine
            loss = load_balance_loss(logits) * (len(mb) / len(data))  # mean over micro-batches
        loss.backward()
        logged += float(loss.detach())
        used.append(f)
        now = grads_of(model)
        parts.append(now if before is None else {n: now[n] - before[n] for n in now})
        before = now
    window = sum(routed) / len(data)
    drift = sum(len(mb) / len(data) * (f - window) for mb, f in zip(micro, used, strict=True))
    # Σ_m w_m fᵐ Pᵐ − (Σ_m w_m fᵐ)(Σ_m w_m Pᵐ), w_m = len(m)/N: per-micro-batch loss − full loss
    w = [len(mb) / len(data) for mb in micro]
    own = [r / len(mb) for r, mb in zip(routed, micro, strict=True)]
    mean_p = sum(wm * p for wm, p in zip(w, probs, strict=True))
    joint = sum(wm * f * p for wm, f, p in zip(w, own, probs, strict=True))
    covariance = len(window) * float((joint - window * mean_p).sum())
    return {
        "grads": grads_of(model),
        "loss": logged,
        "parts": parts,
        "fractions": used,
        "window_fractions": window,
        "count_error": float(drift.abs().max()),
        "covariance": covariance,
    }


ORDERS = {"sorted by topic": True, "shuffled": False}  # router_data's `grouped`


@one_thread()
def aux_loss_sweep(
    sizes, seeds, *, n: int = 128, modes=("per_micro_batch", "running_counts", "global_counts")
) -> dict:
    """The load-balancing loss's gap to the big batch of `n` tokens, for each seed (router and
    tokens both drawn from it), token order (ORDERS), mode and micro-batch size.

    Returns {"window": n, "sizes", "seeds", "gaps": {order: {mode: [[relative L2 gap per size] per seed]}},
    "loss_excess": {order: [[per-micro-batch logged loss − the big batch's, per size] per seed]},
    "covariance": the same runs' E·Σᵢ cov_m(fᵢ, Pᵢ), see `aux_loss_grads`}
    and, with both modes, {"running_closer": {order: [seeds whose running counts land closer to
    the big batch than per-micro-batch counts, per size]}}. Lesson 09."""
    from ..compare import grad_diff

    positive_int("n", n, minimum=2)
    sizes = _validate.positive_ints("sizes", sizes, maximum=n)
    seeds = [
        _validate.seed(f"seeds[{i}]", s) for i, s in enumerate(_validate.sequence("seeds", seeds))
    ]
    modes = _validate.sequence("modes", modes)
    modes = [one_of(f"modes[{i}]", m, AUX_MODES[1:]) for i, m in enumerate(modes)]
    passes = len(seeds) * len(ORDERS) * len(modes) * sum(-(-n // s) for s in sizes)
    _validate.within_max_steps("seeds × orders × modes × micro-batches per window", passes)
    gaps = {order: {m: [] for m in modes} for order in ORDERS}
    excess = {order: [] for order in ORDERS}
    covariance = {order: [] for order in ORDERS}
    for seed in seeds:
        model = router_model(seed=seed)
        for order, grouped in ORDERS.items():
            tokens = router_data(n, grouped=grouped, seed=seed)
            full = aux_loss_grads(model, tokens, n, "full")
            for m in modes:
                runs = [aux_loss_grads(model, tokens, s, m) for s in sizes]
                gaps[order][m].append([grad_diff(r["grads"], full["grads"]).rel_l2 for r in runs])
                if m == "per_micro_batch":
                    excess[order].append([r["loss"] - full["loss"] for r in runs])
                    covariance[order].append([r["covariance"] for r in runs])
    out = {"window": n, "sizes": sizes, "seeds": seeds, "gaps": gaps, "loss_excess": excess}
    out["covariance"] = covariance  # aux_loss_grads' "covariance" of the same runs
    if {"per_micro_batch", "running_counts"} <= set(modes):
        # per order and size: the seeds whose running counts land closer than per-micro-batch ones
        out["running_closer"] = {
            order: [
                sum(r < p for r, p in zip(run, per, strict=True))
                for run, per in zip(
                    zip(*gaps[order]["running_counts"]),
                    zip(*gaps[order]["per_micro_batch"]),
                    strict=True,
                )
            ]
            for order in ORDERS
        }
    return out


def term_errors(result: dict, reference: dict) -> dict:
    """Each micro-batch's term of `result` (an `aux_loss_grads` result) against the same term of
    `reference` (the same tokens and micro-batches, "global_counts": the exact terms).

    Returns {"per_term": [relative L2 gap of each micro-batch's term], "kept": ‖Σ errors‖ /
    Σ ‖error‖}: 1 when the terms' errors add up, near 0 when they cancel. Lesson 09."""
    from ..compare import flatten, grad_diff

    for name, value in (("result", result), ("reference", reference)):
        _validate.result(
            name, value, {"parts": _validate.nonempty([dict])}, "an aux_loss_grads(...) result"
        )
    if len(result["parts"]) != len(reference["parts"]):
        raise ValueError(
            f"result and reference must split the tokens into as many micro-batches, got "
            f"{len(result['parts'])} and {len(reference['parts'])}"
        )
    pairs = list(zip(result["parts"], reference["parts"], strict=True))
    errors = [flatten(a) - flatten(b) for a, b in pairs]
    added = sum(float(e.norm()) for e in errors)
    return {
        "per_term": [grad_diff(a, b).rel_l2 for a, b in pairs],
        "kept": float(sum(errors).norm()) / added if added > 0 else 0.0,
    }
