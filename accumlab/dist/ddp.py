"""DDP under gradient accumulation, run inside each rank (lesson 07).

Every function here takes the rank's `Context` first and returns plain data with CPU tensors; the
launcher collects them and `accumlab.dist.lesson` compares them with single-process references.
"""

from __future__ import annotations

import contextlib
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from ..data import regression_data
from ..device import synchronize
from ..engine import grads_of, params_of
from ..models import mlp, seeded
from .comm import CommCounter, count_allreduce
from .shards import shard

# How a loop keeps DDP from syncing on the first k-1 micro-steps:
#   every         — it does not: every backward all-reduces (k rounds per optimizer step)
#   no_sync       — `with ddp.no_sync():` around forward AND backward of micro-steps 0..k-2
#   require_flag  — `ddp.require_backward_grad_sync = (last micro-step)` before the forward
#   backward_only — the mistake: forward outside no_sync, only backward inside (DDP decides at
#                   forward time whether the coming backward syncs, so this still syncs k times)
SYNC_MODES = ("every", "no_sync", "require_flag", "backward_only")


def _wrap(model: nn.Module, ctx, **kwargs):
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = torch.device(ctx.ddp_device)
    model = model.to(device)
    ids = [device.index] if device.type == "cuda" else None
    kwargs.setdefault("process_group", ctx.group)  # None: the default group
    return DDP(model, device_ids=ids, **kwargs)


def _sync(device: str) -> None:
    synchronize(device)  # GPU kernels are asynchronous: time what actually ran


def accumulate(ddp, micro_batches, mode: str, counter: CommCounter, forward=None) -> None:
    """One optimizer step's worth of micro-steps under `mode` (see SYNC_MODES); no update."""
    k = len(micro_batches)
    forward = forward or (lambda module, mb: F.mse_loss(module(mb.x), mb.y))
    for i, mb in enumerate(micro_batches):
        last = i == k - 1
        skip = mode != "every" and not last
        if mode == "require_flag":
            ddp.require_backward_grad_sync = last  # the flag no_sync() sets, as nanoGPT does
        if skip and mode == "no_sync":
            with ddp.no_sync():  # forward AND backward inside: DDP decides at forward time
                loss = forward(ddp, mb) / k  # loss / k: each micro-batch weighs 1/k of the window
                loss.backward()
        else:
            loss = forward(ddp, mb) / k
            quiet = skip and mode == "backward_only"
            with ddp.no_sync() if quiet else contextlib.nullcontext():
                loss.backward()
        counter.end_backward()
    ddp.require_backward_grad_sync = True


def sync_modes(
    ctx, *, k: int = 4, micro_batch: int = 8, features: int = 4, hidden: int = 16, seed: int = 0
) -> dict:
    """Each SYNC_MODE for one optimizer step: all-reduce calls and bytes per backward, and this
    rank's final gradient (to compare across ranks and with the single-process reference)."""
    data = regression_data(n=ctx.world_size * k * micro_batch, features=features, seed=seed)
    device = ctx.ddp_device
    micro = [shard(data, ctx.rank, ctx.world_size, i, micro_batch).to(device) for i in range(k)]
    out = {}
    for mode in SYNC_MODES:
        ddp = _wrap(mlp(features, hidden, seed=seed), ctx)
        counter = CommCounter()
        count_allreduce(ddp, counter, ctx.group)
        accumulate(ddp, micro, mode, counter)
        out[mode] = {**counter.as_dict(), "grads": _cpu(grads_of(ddp.module))}
        ctx.step(f"DDP {mode}")
    return out


def timing_model(features: int = 32, hidden: int = 256, seed: int = 0) -> nn.Module:
    """A float32 MLP big enough that an all-reduce of its gradients costs measurable time."""
    return mlp(features, hidden, depth=2, seed=seed, dtype=torch.float32)


def sweep(
    ctx,
    *,
    ks=(1, 2, 4, 8),
    micro_batches=(8, 32),
    repeats: int = 3,
    features: int = 32,
    hidden: int = 256,
    seed: int = 0,
) -> list[dict]:
    """Step time, all-reduce calls and bytes for every (ranks, k, micro-batch, no_sync) on the
    ranks 1..world of this group (sub-groups of the first r ranks). Rank 0 returns the rows."""
    import torch.distributed as dist

    # sub-groups of the first r ranks, on the backend the plan chose (not necessarily the default's)
    groups = {
        r: dist.new_group(list(range(r)), backend=ctx.plan.backend)
        for r in range(1, ctx.world_size + 1)
    }
    device = ctx.ddp_device
    gen = torch.Generator().manual_seed(seed + ctx.rank)
    rows = []
    for ranks, group in groups.items():
        if ctx.rank < ranks:
            for k in ks:
                for m in micro_batches:
                    x = torch.randn(k, m, features, generator=gen).to(device)
                    y = torch.randn(k, m, 1, generator=gen).to(device)
                    micro = [_XY(x[i], y[i]) for i in range(k)]
                    for mode in ("every", "no_sync"):
                        rows.append(
                            _time_one(ctx, group, micro, mode, repeats, features, hidden, seed)
                            | {"ranks": ranks, "k": k, "micro_batch": m}
                        )
        dist.barrier(group=ctx.group)  # ranks outside the sub-group wait instead of racing ahead
        ctx.step(f"sweep {ranks} rank(s)")
    return rows if ctx.rank == 0 else []


class _XY:
    def __init__(self, x, y):
        self.x, self.y = x, y


def _time_one(ctx, group, micro, mode, repeats, features, hidden, seed) -> dict:
    ddp = _wrap(timing_model(features, hidden, seed), ctx, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    counter = CommCounter()
    count_allreduce(ddp, counter, group)
    times = []
    for rep in range(
        repeats + 1
    ):  # the first step warms up (allocations, DDP's first-iteration work)
        counter_before = (counter.calls, counter.bytes)
        _sync(ctx.ddp_device)
        t0 = time.perf_counter()
        accumulate(ddp, micro, mode, counter)
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync(ctx.ddp_device)
        if rep:
            times.append(time.perf_counter() - t0)
    calls, nbytes = counter.calls - counter_before[0], counter.bytes - counter_before[1]
    return {
        "no_sync": mode == "no_sync",
        "allreduce_calls": calls,
        "allreduce_bytes": nbytes,
        "step_time_s": statistics.median(times),
        "allreduce_alone_s": _allreduce_alone(ddp, group, repeats),
        "bucket_copy_alone_s": _bucket_copy_alone(ddp, repeats),
    }


def _allreduce_alone(ddp, group, repeats: int) -> float:
    """Median seconds of one all-reduce of every gradient, on its own (nothing to overlap with)."""
    import torch.distributed as dist

    flat = torch.cat([p.detach().reshape(-1) for p in ddp.parameters()])
    times = []
    for _ in range(repeats + 1):
        synchronize(flat.device)
        t0 = time.perf_counter()
        dist.all_reduce(flat, group=group)
        synchronize(flat.device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def _bucket_copy_alone(ddp, repeats: int) -> float:
    """Median seconds of copying every gradient into one flat buffer and back, on its own: what
    DDP adds per synced backward with gradient_as_bucket_view=False."""
    grads = [torch.ones_like(p).reshape(-1) for p in ddp.parameters()]
    flat = torch.empty(sum(g.numel() for g in grads), dtype=grads[0].dtype, device=grads[0].device)
    slots = flat.split([g.numel() for g in grads])
    times = []
    for _ in range(repeats + 1):
        synchronize(flat.device)
        t0 = time.perf_counter()
        for slot, g in zip(slots, grads, strict=True):
            slot.copy_(g)  # into the bucket before the all-reduce
        for slot, g in zip(slots, grads, strict=True):
            g.copy_(slot)  # and back into .grad after it
        synchronize(flat.device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


class BranchNet(nn.Module):
    """An MLP whose middle layer `extra` is used only when `use_extra` is True: the shape of models
    with optional branches (stochastic depth, mixture of experts, auxiliary heads)."""

    def __init__(self, features: int = 4, hidden: int = 8, *, seed: int = 0, dtype=torch.float64):
        super().__init__()
        with seeded(seed):
            self.inp = nn.Linear(features, hidden).to(dtype)
            self.extra = nn.Linear(hidden, hidden).to(dtype)
            self.head = nn.Linear(hidden, 1).to(dtype)

    def forward(self, x: torch.Tensor, use_extra: bool = True) -> torch.Tensor:
        h = torch.tanh(self.inp(x))
        if use_extra:
            h = torch.tanh(self.extra(h))
        return self.head(h)


def uses_extra(micro_step: int) -> bool:
    """The pitfall's pattern: the branch runs only in the FIRST micro-step of each window."""
    return micro_step == 0


# How the pitfall experiment syncs a model whose last micro-step leaves `extra` unused:
#   no_sync_find_unused — no_sync on micro-steps 0..k-2 with find_unused_parameters=True
#   sync_every          — find_unused_parameters=True, every micro-step syncs (k rounds)
#   manual_allreduce    — no_sync on ALL micro-steps, then one all-reduce of every gradient
#                         (missing ones as zeros) by hand: does not depend on DDP's bookkeeping
PITFALL_VARIANTS = ("no_sync_find_unused", "sync_every", "manual_allreduce")


def pitfall(
    ctx,
    *,
    k: int = 3,
    micro_batch: int = 4,
    features: int = 4,
    hidden: int = 8,
    lr: float = 0.5,
    seed: int = 0,
) -> dict:
    """Each PITFALL_VARIANT for one optimizer step: this rank's gradients and updated parameters."""
    data = regression_data(n=ctx.world_size * k * micro_batch, features=features, seed=seed)
    device = ctx.ddp_device
    micro = [shard(data, ctx.rank, ctx.world_size, i, micro_batch).to(device) for i in range(k)]
    out = {}
    for variant in PITFALL_VARIANTS:
        ddp = _wrap(BranchNet(features, hidden, seed=seed), ctx, find_unused_parameters=True)
        counter = CommCounter()
        count_allreduce(ddp, counter, ctx.group)
        opt = torch.optim.SGD(ddp.parameters(), lr=lr)
        for i, mb in enumerate(micro):
            sync = variant == "sync_every" or (variant == "no_sync_find_unused" and i == k - 1)
            with contextlib.nullcontext() if sync else ddp.no_sync():
                loss = F.mse_loss(ddp(mb.x, uses_extra(i)), mb.y) / k
                loss.backward()
            counter.end_backward()
        if variant == "manual_allreduce":
            manual_allreduce(ddp.module, counter, ctx.group)
        grads = _cpu(grads_of(ddp.module))
        opt.step()
        out[variant] = {**counter.as_dict(), "grads": grads, "params": _cpu(params_of(ddp.module))}
        ctx.step(f"pitfall {variant}")
    return out


def manual_allreduce(model: nn.Module, counter: CommCounter | None = None, group=None) -> None:
    """Average every parameter's gradient over ranks in ONE all-reduce of a flat buffer; a
    parameter with no gradient on this rank contributes zeros."""
    import torch.distributed as dist

    params = list(model.parameters())
    flat = torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
    )
    if counter is not None:
        counter.add(flat)
    dist.all_reduce(flat, group=group)
    flat /= dist.get_world_size(group)  # DDP averages; do the same so the two paths are comparable
    offset = 0
    for p in params:
        p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
        offset += p.numel()


def _cpu(tensors: dict) -> dict:
    return {n: t.detach().cpu() for n, t in tensors.items()}
