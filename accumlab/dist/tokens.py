"""Cross-rank loss normalisation for token data on real processes (lessons 03 and 07).

Ranks hold different numbers of real tokens. Dividing each rank's loss by its OWN token count and
letting DDP average the ranks gives the mean of per-rank means; all-reducing the token count first
gives every token the same weight, as one process over the global batch would.
"""

from __future__ import annotations

import torch

from ..data import token_data
from ..engine import grads_of
from ..losses import get_loss
from ..models import TinyLM
from .comm import CommCounter, count_allreduce
from .ddp import _cpu, _wrap
from .shards import shard

# local_mean   — each rank: loss sum / its own tokens in the window (DDP then averages ranks)
# global_count — each rank: loss sum × ranks / tokens of ALL ranks in the window (all-reduced)
TOKEN_VARIANTS = ("local_mean", "global_count")


def token_batch(world_size: int, k: int, micro_batch: int, *, vocab: int = 16, seed: int = 0):
    """The global batch of padded sequences, lengths 1..24 drawn per sequence."""
    return token_data(world_size * k * micro_batch, min_len=1, max_len=24, vocab=vocab, seed=seed)


def token_normalisation(
    ctx, *, k: int = 2, micro_batch: int = 2, vocab: int = 16, dim: int = 8, seed: int = 0
) -> dict:
    """Each TOKEN_VARIANT for one optimizer step (no_sync on all but the last micro-step)."""
    import torch.distributed as dist

    data = token_batch(ctx.world_size, k, micro_batch, vocab=vocab, seed=seed)
    device = ctx.ddp_device
    micro = [shard(data, ctx.rank, ctx.world_size, i, micro_batch).to(device) for i in range(k)]
    ce = get_loss("cross_entropy")
    local_tokens = sum(ce.count(mb.y) for mb in micro)
    total = torch.tensor([float(local_tokens)], device=device)
    dist.all_reduce(total, group=ctx.group)  # one tiny all-reduce per window, first
    out = {"local_tokens": local_tokens, "global_tokens": int(total.item())}
    for variant in TOKEN_VARIANTS:
        ddp = _wrap(TinyLM(vocab, dim, seed=seed), ctx)
        counter = CommCounter()
        count_allreduce(ddp, counter, ctx.group)
        if variant == "local_mean":
            divisor = local_tokens
        else:
            divisor = total.item() / ctx.world_size  # DDP divides by the ranks: undo it here
        for i, mb in enumerate(micro):
            loss_sum, _ = ce(ddp(mb.x), mb.y)
            if i < k - 1:
                with ddp.no_sync():
                    (loss_sum / divisor).backward()
            else:
                (loss_sum / divisor).backward()
        out[variant] = {"grads": _cpu(grads_of(ddp.module)), "allreduce_calls": counter.calls}
    ctx.step("token normalisation")
    return out
