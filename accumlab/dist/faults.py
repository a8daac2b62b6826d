"""Tasks that fail on purpose, to show (and test) that a launch never hangs or leaks (lesson 07)."""

from __future__ import annotations

import time


def raise_on_rank(ctx, *, rank: int = 1, message: str = "injected failure"):
    """Rank `rank` raises while the others wait for it in a barrier they would never leave."""
    import torch.distributed as dist

    if ctx.rank == rank:
        raise ValueError(message)
    dist.barrier()
    return ctx.rank


def hang_on_rank(ctx, *, rank: int = 1):
    """Rank `rank` never reaches the barrier: without a timeout the group would wait forever."""
    import torch.distributed as dist

    if ctx.rank == rank:
        while True:
            time.sleep(1)
    dist.barrier()
    return ctx.rank


def echo(ctx, **kwargs):
    """Each rank returns its rank, the world size, its devices and the backend: a smoke test."""
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(ctx.rank)], device=ctx.ddp_device)
    dist.all_reduce(t)  # one real collective, so a broken rendezvous cannot pass unnoticed
    return {
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "backend": dist.get_backend(),
        "device": ctx.ddp_device,
        "rank_sum": float(t.item()),
        **kwargs,
    }
