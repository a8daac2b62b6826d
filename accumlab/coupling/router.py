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
    (AUX_MODES), on a copy of `model`. Returns {"grads", "loss"}: the gradient the optimizer sees
    and the loss value the loop would log. Lesson 09."""
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
    for mb in micro:
        logits = model(mb.x)
        if mode == "running_counts":
            # counts of every micro-batch of this window so far, this one included
            mine = routed_fractions(logits) * len(mb)
            counts = mine if counts is None else counts + mine
            seen += len(mb)
            loss = load_balance_loss(logits, counts / seen, total=len(data))
        elif mode == "global_counts":
            loss = load_balance_loss(logits, fractions, total=len(data))  # a share: just add
        else:
            loss = load_balance_loss(logits) * (len(mb) / len(data))  # mean over micro-batches
        loss.backward()
        logged += float(loss.detach())
    return {"grads": grads_of(model), "loss": logged}
