"""What DDP's gradient buckets cost in memory, measured inside each rank (lesson 07): after one
synced backward, and after every micro-step of no_sync windows, with `gradient_as_bucket_view`
False and True and `zero_grad(set_to_none=...)` True and False.

Why the window matters: with `gradient_as_bucket_view=True` each `.grad` becomes a view into its
bucket only when a synced backward writes it there. `zero_grad(set_to_none=True)` (the default)
drops that view, so the next window's no_sync micro-steps allocate fresh `.grad` tensors beside
the buckets again: two copies, as with the view off (the `batched_grad_copy` note in DDP's
docstring says the same). Only `set_to_none=False` keeps the views, from the second window on.
"""

from __future__ import annotations

import contextlib

import torch

from ..device import MemoryMeter
from .ddp import _wrap, timing_model


def _input(ctx, micro_batch: int, features: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(micro_batch, features, generator=gen).to(ctx.ddp_device)


def bucket_memory(
    ctx, *, features: int = 32, hidden: int = 256, seed: int = 0, k: int = 4, windows: int = 2
) -> dict:
    """Bytes this rank allocates for gradients with DDP, measured (`accumlab.device.MemoryMeter`):
    by wrapping the model (DDP's communication buckets) and after one backward (the .grad
    tensors), with `gradient_as_bucket_view` False (the default) and True; then `window`: the
    bytes held after each micro-step of `windows` no_sync windows of k micro-steps (see
    `window_memory`)."""
    out = {}
    for view in (False, True):
        # model and input on the device BEFORE the meter: on a GPU `.to` allocates the parameters,
        # which are not DDP's to count (on the CPU it is a no-op, which hid the difference)
        model = timing_model(features, hidden, seed).to(ctx.ddp_device)
        x = _input(ctx, 8, features, seed)
        with MemoryMeter(ctx.ddp_device) as meter:
            ddp = _wrap(model, ctx, gradient_as_bucket_view=view, **_no_init_broadcast())
            wrapped = meter.now()
            ddp(x).sum().backward()
            after = meter.now()
        out[str(view).lower()] = {"after_wrap": wrapped, "after_backward": after}
        del ddp
    model = timing_model(features, hidden, seed)
    grads = sum(p.numel() * p.element_size() for p in model.parameters())
    return {
        "grad_bytes": grads,
        "n_params": len(list(model.parameters())),
        "k": k,
        "gradient_as_bucket_view": out,
        "window": window_memory(
            ctx, features=features, hidden=hidden, seed=seed, k=k, windows=windows
        ),
    }


def window_memory(
    ctx, *, features: int = 32, hidden: int = 256, seed: int = 0, k: int = 4, windows: int = 2
) -> dict:
    """{"view_<true|false>_set_to_none_<true|false>": bytes held after each micro-step} over
    `windows` windows: no_sync on micro-steps 0..k-2, a synced backward on the last, then
    `optimizer.step()` and `optimizer.zero_grad(set_to_none=...)` (plain SGD: no optimizer
    state). Measured from before the wrap, so the buckets are included."""
    out = {}
    for view in (False, True):
        for to_none in (True, False):
            model = timing_model(features, hidden, seed).to(ctx.ddp_device)
            x = _input(ctx, 8, features, seed)
            held = []
            with MemoryMeter(ctx.ddp_device) as meter:
                ddp = _wrap(model, ctx, gradient_as_bucket_view=view, **_no_init_broadcast())
                opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
                for _ in range(windows):
                    for i in range(k):
                        last = i == k - 1
                        with contextlib.nullcontext() if last else ddp.no_sync():
                            (ddp(x).sum() / k).backward()
                        held.append(meter.now())
                    opt.step()
                    opt.zero_grad(set_to_none=to_none)
            out[f"view_{str(view).lower()}_set_to_none_{str(to_none).lower()}"] = held
            del ddp, opt
    return out


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
    """DDP's default bucket sizes in the installed torch: the first bucket (filled by the last
    layers, whose gradients are ready first) is capped at `first_bucket_bytes`, later ones at
    `bucket_cap_mb` MiB. A model whose gradients fit under the first cap gets one bucket: its
    all-reduce can start only after the whole backward, so there is nothing to overlap."""
    import torch.distributed as dist
    from torch.nn.parallel import distributed as ddp_module

    return {
        "first_bucket_bytes": int(dist._DEFAULT_FIRST_BUCKET_BYTES),
        "bucket_cap_mb": getattr(ddp_module, "_DEFAULT_BUCKET_CAP_MB", 25),
    }
