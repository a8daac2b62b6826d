"""FSDP2 (`fully_shard`) under gradient accumulation, run inside each rank (lesson 07).

`set_requires_gradient_sync(False)` on micro-steps 0..k-2 skips the reduce-scatter, but each rank
then keeps UNSHARDED gradients until the last micro-step; syncing every micro-step keeps only the
rank's shard of the gradient, paid for with a reduce-scatter per micro-step.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from ..data import regression_data
from ..models import mlp
from .comm import CommCounter, count_fsdp_collectives
from .shards import shard

FSDP_VARIANTS = ("sync_each", "sync_last")


def grad_bytes(model) -> dict:
    """Bytes of gradient this rank holds right now: its shards (`param.grad`, public) and the
    unsharded gradients FSDP keeps between micro-steps without sync (read from FSDP2's internals,
    so "unsharded" is None on a torch whose internals differ)."""
    from torch.distributed.fsdp import FSDPModule

    sharded = 0
    for p in model.parameters():
        if p.grad is not None:
            local = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
            sharded += local.numel() * local.element_size()
    unsharded = 0
    try:
        for m in model.modules():
            if not isinstance(m, FSDPModule):
                continue
            state = m._get_fsdp_state()
            groups = getattr(state, "_fsdp_param_groups", None)  # recent torch: a list
            if groups is None:
                groups = [state._fsdp_param_group]  # older torch: at most one group
            for group in groups:
                for fp in group.fsdp_params if group is not None else ():
                    g = getattr(fp, "_unsharded_param", None)  # absent while resharded
                    if g is not None and g.grad is not None:
                        unsharded += g.grad.numel() * g.grad.element_size()
                    acc = fp.unsharded_accumulated_grad
                    if acc is not None:
                        unsharded += acc.numel() * acc.element_size()
    except AttributeError:
        unsharded = None
    return {
        "sharded": sharded,
        "unsharded": unsharded,
        "total": sharded + unsharded if unsharded is not None else None,
    }


def fsdp_accumulation(
    ctx,
    *,
    k: int = 4,
    micro_batch: int = 8,
    features: int = 16,
    hidden: int = 64,
    depth: int = 2,
    seed: int = 0,
) -> dict:
    """Each FSDP_VARIANT for one optimizer step: collectives, gradient bytes held after every
    micro-step, time, and the full (all-gathered) gradient."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    device = ctx.fsdp_device
    # an explicit mesh: without it FSDP2 picks CUDA whenever a GPU exists, even for a CPU group
    mesh = init_device_mesh(torch.device(device).type, (ctx.world_size,))
    data = regression_data(n=ctx.world_size * k * micro_batch, features=features, seed=seed)
    micro = [shard(data, ctx.rank, ctx.world_size, i, micro_batch).to(device) for i in range(k)]
    out = {}
    for variant in FSDP_VARIANTS:
        model = mlp(features, hidden, depth=depth, seed=seed).to(device)
        full_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)  # one FSDP unit per Linear: shard, gather, free
        fully_shard(model, mesh=mesh)
        rs, ag = CommCounter(), CommCounter()
        counted = count_fsdp_collectives(model, rs, ag)
        held = []
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for i, mb in enumerate(micro):
            model.set_requires_gradient_sync(variant == "sync_each" or i == k - 1)
            loss = F.mse_loss(model(mb.x), mb.y) / k
            loss.backward()
            rs.end_backward()
            held.append(grad_bytes(model))
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - t0
        grads = {n: p.grad.full_tensor().detach().cpu() for n, p in model.named_parameters()}
        out[variant] = {
            "reduce_scatter": rs.as_dict(),
            "all_gather": ag.as_dict(),
            "counted": counted,
            "grad_bytes": held,
            "seconds": seconds,
            "grads": grads,
            "param_bytes_full": full_bytes,
        }
        ctx.step(f"FSDP {variant}")
    return out
