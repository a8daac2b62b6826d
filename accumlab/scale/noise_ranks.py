"""`AccumulationNoise` on data-parallel ranks (lesson 13): a task for `accumlab.dist.launch` that
accumulates through DDP, so a test can compare the meter's readings with the exact B_simple.
Nothing here runs at import."""

from __future__ import annotations


def ddp_meter(ctx, *, micro_batch_size=8, accumulation_steps=16, windows=200, excess=0.05) -> dict:
    """One rank takes windows r, r + world, … of lesson 13's problem and accumulates each through
    DDP twice: with `no_sync()` on the first k − 1 micro-batches, and all-reducing every one.
    Returns this rank's readings: `ranks=world` and `ranks=1` meters on the no_sync loop, the
    `ranks=world` meter on the other, and what the meter says when `ranks` is left out."""
    import contextlib

    import torch
    from torch.nn.parallel import DistributedDataParallel

    from .noise import Problem
    from .two_batch import AccumulationNoise, linear_model, micro_batch_windows

    b, k, world = micro_batch_size, accumulation_steps, ctx.world_size
    problem = Problem()
    try:
        AccumulationNoise(linear_model(problem, excess), b, k)
        refused = None
    except ValueError as err:
        refused = str(err)
    mine = micro_batch_windows(problem, b, k, windows * world)[ctx.rank :: world]
    out = {"rank": ctx.rank, "refused": refused, "exact": problem.b_simple(excess)}
    for sync_every in (False, True):
        net = linear_model(problem, excess)
        ddp = DistributedDataParallel(net)
        meters = {r: AccumulationNoise(net, b, k, beta=None, ranks=r) for r in (world, 1)}
        for window in mine:
            for j, (x, y) in enumerate(window):
                sync = sync_every or j == k - 1
                with contextlib.nullcontext() if sync else ddp.no_sync():
                    (0.5 * ((ddp(x).squeeze(1) - y) ** 2).mean() / k).backward()
            for meter in meters.values():
                meter.window_done()
            net.zero_grad()
        name = "sync_every" if sync_every else "no_sync"
        out[name] = meters[world].b_simple
        out[f"{name}_ranks_1"] = meters[1].b_simple
    torch.distributed.barrier()
    return out
