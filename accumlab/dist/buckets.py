"""What DDP's gradient buckets cost in memory, measured inside each rank (lesson 07): after one
synced backward, and after every micro-step of no_sync windows, with `gradient_as_bucket_view`
False and True and `zero_grad(set_to_none=...)` True and False.

Why the window matters: with `gradient_as_bucket_view=True` each `.grad` becomes a view into its
bucket only when a synced backward writes it there. `zero_grad(set_to_none=True)` (the default)
drops that view, so the next window's no_sync micro-steps allocate fresh `.grad` tensors beside
the buckets again: two copies, as with the view off (the `batched_grad_copy` note in DDP's
docstring says the same). Only `set_to_none=False` keeps the views, from the second window on.
With `find_unused_parameters=False` (the default), DDP starts with one bucket per dtype and
device (one here) and rebuilds its buckets once, in backward order, at the first forward after its
first synced backward (`_pre_forward` calls `reducer._rebuild_buckets()`). It drops the old buckets before it
allocates the new, but `.grad` tensors still viewing the old ones keep them alive until DDP points
them at the new: with the views kept, two copies of the buckets for a moment; with `.grad` freed,
or without the view, the rebuild adds nothing (lesson 07's cell 18 asserts the latter). Under
no_sync that forward is window 2's first, syncing every micro-step window 1's second, so the kept
views' high point matches syncing every micro-step only from window 3: hence three windows.
Syncing every micro-step (what Accelerate's `sync_each_batch=True` does) turns each fresh `.grad`
into a view at once, so with the view it holds one copy whatever `zero_grad` does.
"""

from __future__ import annotations

import contextlib
import gc

import torch
import torch.distributed as dist

from ..device import MemoryMeter, synchronize
from .ddp import _wrap, timing_model


def _input(ctx, micro_batch: int, features: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(micro_batch, features, generator=gen).to(ctx.ddp_device)


def _warm_up(ctx, features: int, hidden: int, seed: int) -> None:
    """One forward and backward, and one collective, on the device before any meter starts. On
    a GPU, cuBLAS takes its workspace from the caching allocator at a handle's first matmul and
    keeps it, one per (thread, stream): the forward's thread and autograd's device thread.
    Measured first, those megabytes would read as copies of the gradients DDP does not keep."""
    model = timing_model(features, hidden, seed).to(ctx.ddp_device)
    model(_input(ctx, 8, features, seed)).sum().backward()
    # the group's first collective sets its backend up (NCCL: the communicator, on first use);
    # here, before any meter, whatever of it stays allocated is not read as DDP's
    dist.all_reduce(torch.zeros(1, device=ctx.ddp_device), group=ctx.group)
    synchronize(ctx.ddp_device)


def collected_now(meter: MemoryMeter) -> int:
    """`meter.now()` once the cyclic garbage collector has run. Something in each micro-step
    (the loss, its gradient seed) can sit in a reference cycle until the collector runs, which
    it does at allocation counts, not at our readings: 4 bytes above a whole number of copies in
    about one reading in 300 on the CPU, where the meter counts exact bytes."""
    gc.collect()
    return meter.now()


def bucket_memory(
    ctx, *, features: int = 32, hidden: int = 256, seed: int = 0, k: int = 4, windows: int = 3
) -> dict:
    """Bytes this rank allocates for gradients with DDP, measured (`accumlab.device.MemoryMeter`):
    by wrapping the model (DDP's communication buckets) and after one backward (the .grad
    tensors), with `gradient_as_bucket_view` False (the default) and True; then `window`: the
    bytes held after each micro-step of `windows` windows of k micro-steps, and `window_peak`:
    the most held at once in each window (see `window_memory`)."""
    _warm_up(ctx, features, hidden, seed)
    # every reading runs the cyclic collector: freezing what exists now (torch and its imports,
    # hundreds of thousands of objects) keeps each collection to what the micro-steps create,
    # 0.2 s a reading less; the cycles a reading waits for are all created after this point
    import torch._dynamo  # noqa: F401  (DDP's constructor imports it: imported before the freeze)

    gc.collect()
    gc.freeze()
    try:
        return _bucket_memory(ctx, features, hidden, seed, k, windows)
    finally:
        gc.unfreeze()


def _bucket_memory(ctx, features: int, hidden: int, seed: int, k: int, windows: int) -> dict:
    out = {}
    for view in (False, True):
        # model and input on the device BEFORE the meter: on a GPU `.to` allocates the parameters,
        # which are not DDP's to count (on the CPU it is a no-op, which hid the difference)
        model = timing_model(features, hidden, seed).to(ctx.ddp_device)
        x = _input(ctx, 8, features, seed)
        with MemoryMeter(ctx.ddp_device) as meter:
            ddp = _wrap(model, ctx, gradient_as_bucket_view=view, **_no_init_broadcast())
            wrapped = collected_now(meter)
            ddp(x).sum().backward()
            after = collected_now(meter)
        out[str(view).lower()] = {"after_wrap": wrapped, "after_backward": after}
        del ddp
    model = timing_model(features, hidden, seed)
    grads = sum(p.numel() * p.element_size() for p in model.parameters())
    held, peak = window_memory(
        ctx, features=features, hidden=hidden, seed=seed, k=k, windows=windows
    )
    return {
        "grad_bytes": grads,
        "n_params": len(list(model.parameters())),
        "k": k,
        "device": torch.device(ctx.ddp_device).type,  # CPU bytes are exact; CUDA rounds blocks
        "gradient_as_bucket_view": out,
        "window": held,
        "window_peak": peak,
    }


# the loops `window_memory` measures: (gradient_as_bucket_view, zero_grad's set_to_none, whether
# every micro-step syncs); key "view_<v>_set_to_none_<n>" with no_sync on micro-steps 0..k-2,
# "view_<v>_sync_each" syncing every micro-step with the default zero_grad
WINDOW_LOOPS = {
    **{
        f"view_{str(v).lower()}_set_to_none_{str(n).lower()}": (v, n, False)
        for v in (False, True)
        for n in (True, False)
    },
    **{f"view_{str(v).lower()}_sync_each": (v, True, True) for v in (False, True)},
}


def window_memory(
    ctx, *, features: int = 32, hidden: int = 256, seed: int = 0, k: int = 4, windows: int = 2
) -> tuple[dict, dict]:
    """({loop: bytes held after each micro-step}, {loop: the most held at once in each window})
    over `windows` windows of k micro-steps for each of WINDOW_LOOPS, each window ending with
    `optimizer.step()` and `optimizer.zero_grad(set_to_none=...)` (plain SGD: no optimizer
    state). Measured from before the wrap, so the buckets are included. The high point restarts
    at each window: the first window's (no views yet) would otherwise hide every later one, and
    the second's holds DDP's one-time bucket rebuild under no_sync (with the views kept, the old
    buckets they hold beside the new ones)."""
    held, peak = {}, {}
    for key, (view, to_none, sync_each) in WINDOW_LOOPS.items():
        model = timing_model(features, hidden, seed).to(ctx.ddp_device)
        x = _input(ctx, 8, features, seed)
        after, peaks = [], []
        with MemoryMeter(ctx.ddp_device) as meter:
            ddp = _wrap(model, ctx, gradient_as_bucket_view=view, **_no_init_broadcast())
            opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
            for _ in range(windows):
                collected_now(meter)
                meter.restart_peak()
                for i in range(k):
                    sync = sync_each or i == k - 1
                    with contextlib.nullcontext() if sync else ddp.no_sync():
                        (ddp(x).sum() / k).backward()
                    after.append(collected_now(meter))
                opt.step()
                opt.zero_grad(set_to_none=to_none)
                peaks.append(meter.peak)
        held[key], peak[key] = after, peaks
        del ddp, opt
    return held, peak


def _no_init_broadcast() -> dict:
    """`init_sync=False` where DDP has it (torch >= 2.7): the replicas are built alike (one seed),
    so DDP may skip broadcasting them. That broadcast flattens every parameter into one temporary
    buffer, as large as the gradients, which gloo's worker thread frees when it gets to it: on a
    busy machine it was sometimes still alive after the backward, and read as a second copy of
    the gradients that DDP does not keep (10 of 80 wraps, 2 ranks, a load of 9 on 2 cores)."""
    import inspect

    from torch.nn.parallel import DistributedDataParallel as DDP

    return {"init_sync": False} if "init_sync" in inspect.signature(DDP).parameters else {}


def bucket_caps() -> dict:
    """DDP's default bucket sizes in the installed torch: once DDP rebuilds its buckets in
    backward order (at the forward after its first synced backward; before that, by default,
    every gradient is in one bucket), the first bucket (filled by the last layers, whose
    gradients are ready first) is capped at `first_bucket_bytes`, later ones at `bucket_cap_mb`
    MiB. A model whose gradients fit under the first cap gets one bucket either way: its
    all-reduce can start only after the whole backward, so there is nothing to overlap."""
    from torch.nn.parallel import distributed as ddp_module

    return {
        "first_bucket_bytes": int(dist._DEFAULT_FIRST_BUCKET_BYTES),
        "bucket_cap_mb": getattr(ddp_module, "_DEFAULT_BUCKET_CAP_MB", 25),
    }
