"""Uneven inputs across ranks under accumulation (lesson 07).

When the data does not split evenly, one rank can hold a micro-batch more than the others. The
usual loop syncs on the last micro-step of each window of k, and on a rank's last micro-batch; a
rank with one extra micro-batch then enters one more all-reduce than its peers, which never join
it: it waits until the process group's timeout. `torch.distributed.algorithms.Join` lets the
finished ranks shadow that all-reduce with zeros; `DistributedSampler` avoids the imbalance by
padding (repeating samples) or, with `drop_last=True`, by dropping the tail.

What Join costs and divides by is measured too: DDP's forward under Join makes small all-reduces
of its own on every micro-step (`Join.notify_join_context`, and whether the backward syncs), and
`divide_by_initial_world_size=False` changes the division only where DDP divides: a comm hook
(such as the default `allreduce_hook` the lesson counts with) divides by the group's size itself.
"""

from __future__ import annotations

import contextlib
import datetime
import time

import torch.nn.functional as F

from .._validate import flag, positive_int
from ..data import regression_data
from ..engine import grads_of
from .comm import CommCounter, OtherAllReduces, count_allreduce
from .ddp import _cpu, _wrap
from .shards import shard

# the Join runs: (the counting comm hook registered?, divide_by_initial_world_size,
# throw_on_early_termination); "hook_initial" is the lesson's loop, counted
JOIN_VARIANTS = {
    "hook_initial": (True, True, False),
    "hook_remaining": (True, False, False),
    "no_hook_initial": (False, True, False),
    "no_hook_remaining": (False, False, False),
    "throw": (True, True, True),
}


def micro_batch_counts(world_size: int, k: int) -> list[int]:
    """Micro-batches per rank in the experiment: two full windows each, one more on rank 0."""
    return [2 * k + (1 if r == 0 else 0) for r in range(world_size)]


def _window_loop(ddp, micro, k: int, counter: CommCounter) -> None:
    """Sync on each window's last micro-step and on this rank's last micro-batch (a short last
    window); gradients are zeroed at each window's start, so they end as the last window's."""
    for i, mb in enumerate(micro):
        if i % k == 0:
            ddp.zero_grad(set_to_none=True)
        sync = (i + 1) % k == 0 or i == len(micro) - 1
        with contextlib.nullcontext() if sync else ddp.no_sync():
            (F.mse_loss(ddp(mb.x), mb.y) / k).backward()
        counter.end_backward()


def uneven_inputs(
    ctx,
    *,
    k: int = 2,
    micro_batch: int = 4,
    features: int = 4,
    hidden: int = 8,
    wait: float = 1.0,
    seed: int = 0,
) -> dict:
    """The same loop without and with `Join`, on ranks holding `micro_batch_counts` micro-batches.
    Without Join it runs on a gloo sub-group whose collectives time out after `wait` seconds."""
    import torch.distributed as dist
    from torch.distributed.algorithms import Join

    from ..models import mlp

    counts = micro_batch_counts(ctx.world_size, k)
    data = regression_data(n=ctx.world_size * counts[0] * micro_batch, features=features, seed=seed)
    mine = [shard(data, ctx.rank, ctx.world_size, i, micro_batch) for i in range(counts[ctx.rank])]
    micro = [mb.to(ctx.ddp_device) for mb in mine]
    out = {"micro_batches": counts[ctx.rank]}
    # the hang, bounded: a sub-group with a short timeout (gloo: a timeout raises, it does not
    # abort the process as NCCL's watchdog would), so the rest of the lesson runs on
    group = dist.new_group(
        list(range(ctx.world_size)), timeout=datetime.timedelta(seconds=wait), backend="gloo"
    )
    ddp = _wrap(mlp(features, hidden, seed=seed), ctx, process_group=group)
    counter = CommCounter()
    count_allreduce(ddp, counter, group)
    t0 = time.perf_counter()
    try:
        _window_loop(ddp, micro, k, counter)
        plain = {"finished": True, "error": None}
    except RuntimeError as err:  # the all-reduce no other rank joined
        plain = {"finished": False, "error": str(err).strip().splitlines()[0][:200]}
    plain.update(seconds=time.perf_counter() - t0, allreduce_calls=counter.calls)
    out["plain"] = plain
    del ddp
    dist.barrier(group=ctx.group)  # the finished ranks wait here for the one that timed out
    ctx.step("uneven inputs without Join")

    runs = {}
    for name, (hook, initial, throw) in JOIN_VARIANTS.items():
        ddp = _wrap(mlp(features, hidden, seed=seed), ctx)
        counter = CommCounter()
        if hook:
            count_allreduce(ddp, counter, ctx.group)
        raised = None
        # a rank out of data shadows the others' all-reduces with zeros
        join = Join([ddp], divide_by_initial_world_size=initial, throw_on_early_termination=throw)
        with OtherAllReduces(ddp) as other:
            try:
                with join:
                    _window_loop(ddp, micro, k, counter)
            except RuntimeError as err:  # throw_on_early_termination: every rank raises
                raised = str(err).strip().splitlines()[0][:200]
                if not throw:
                    raise
        runs[name] = {
            "allreduce_calls": counter.calls,
            "per_backward": counter.per_backward,
            "other_allreduce_calls": other.calls,
            "other_allreduce_per_forward": other.per_forward,
            "raised": raised,
            "grads": _cpu(grads_of(ddp.module)),
        }
        del ddp
    last = micro[(len(micro) - 1) // k * k :]  # this rank's last window
    local = mlp(features, hidden, seed=seed).to(ctx.ddp_device)
    for mb in last:
        (F.mse_loss(local(mb.x), mb.y) / k).backward()
    out["join"] = {
        **runs["hook_initial"],
        "forwards": len(micro),
        "local_grads": _cpu(grads_of(local)),  # the last window's gradient before any sync
        "variants": runs,
    }
    ctx.step("uneven inputs with Join")
    return out


def sampler_split(n_samples: int, world_size: int, *, drop_last: bool = False) -> list[list[int]]:
    """The sample indices each rank gets from torch's `DistributedSampler` (shuffle=False) over a
    dataset of `n_samples`: equal counts, by repeating samples from the start (padding) or, with
    `drop_last=True`, by dropping the tail. Lesson 07."""
    from torch.utils.data import DistributedSampler

    # bounded so the index lists stay small; a split describes any job, not a launch here
    positive_int("n_samples", n_samples, maximum=10**6)
    positive_int("world_size", world_size, maximum=2**16)
    flag("drop_last", drop_last)
    if drop_last and n_samples < world_size:
        raise ValueError(
            f"n_samples={n_samples} with drop_last=True and world_size={world_size} leaves every "
            "rank without a sample"
        )
    dataset = range(n_samples)
    return [
        list(DistributedSampler(dataset, world_size, r, shuffle=False, drop_last=drop_last))
        for r in range(world_size)
    ]
