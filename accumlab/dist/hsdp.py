"""HSDP (FSDP2 on a 2-D mesh: replicas × shards) under accumulation (lesson 07).

With HSDP each backward reduce-scatters within a shard group and then all-reduces the shards
across replicas. `set_requires_all_reduce(False)` on micro-steps 0..k-2 keeps the reduce-scatter
(each rank keeps only its shard of the gradient) and skips the all-reduce across replicas until the
last micro-step; `set_requires_gradient_sync(False)` skips both. On 2 ranks the only HSDP mesh is
2 replicas × 1 shard: the reduce-scatter is then a local copy, and what is measured is the
all-reduce across replicas, counted with `FSDPModule.set_all_reduce_hook` (FSDP2 calls the hook
right after each HSDP all-reduce, and not on a micro-step that skips it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..data import regression_data
from ..models import mlp
from .comm import CommCounter
from .shards import shard

# sync_each        — all-reduce across replicas after every backward (the default)
# all_reduce_last  — set_requires_all_reduce(False) on micro-steps 0..k-2
# sync_last        — set_requires_gradient_sync(False) on micro-steps 0..k-2 (no reduction at all)
HSDP_VARIANTS = ("sync_each", "all_reduce_last", "sync_last")


def hsdp_accumulation(
    ctx,
    *,
    k: int = 4,
    micro_batch: int = 8,
    features: int = 16,
    hidden: int = 64,
    depth: int = 2,
    seed: int = 0,
) -> dict:
    """Each HSDP_VARIANT for one optimizer step: all-reduces per backward and the full gradient."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    if ctx.group is not None:  # torchrun with ranks sharing a GPU: no 2-D mesh over that group
        return {"skipped": "ranks share a GPU under torchrun: HSDP is not run on that group"}
    device = ctx.fsdp_device
    mesh = init_device_mesh(
        torch.device(device).type, (ctx.world_size, 1), mesh_dim_names=("replicate", "shard")
    )
    data = regression_data(n=ctx.world_size * k * micro_batch, features=features, seed=seed)
    micro = [shard(data, ctx.rank, ctx.world_size, i, micro_batch).to(device) for i in range(k)]
    out = {"mesh": list(mesh.shape)}
    for variant in HSDP_VARIANTS:
        model = mlp(features, hidden, depth=depth, seed=seed).to(device)
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        counter = CommCounter()
        for m in model.modules():
            if isinstance(m, FSDPModule) and m._get_fsdp_state()._fsdp_param_groups:
                m.set_all_reduce_hook(counter.add)  # runs after each HSDP all-reduce
        for i, mb in enumerate(micro):
            last = i == k - 1
            if variant == "all_reduce_last":
                model.set_requires_all_reduce(last)
            elif variant == "sync_last":
                model.set_requires_gradient_sync(last)
            (F.mse_loss(model(mb.x), mb.y) / k).backward()
            counter.end_backward()
        grads = {n: p.grad.full_tensor().detach().cpu() for n, p in model.named_parameters()}
        out[variant] = {**counter.as_dict(), "grads": grads}
        ctx.step(f"HSDP {variant}")
    return out
