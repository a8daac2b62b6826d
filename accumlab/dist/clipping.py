"""Clipping under data parallelism and accumulation (lesson 07): the norm to clip by is the norm
of the gradient after the window's final sync, over every parameter of every rank.

DDP: before the last (syncing) micro-step each rank holds only its own partial gradient, whose
norm differs from rank to rank. FSDP2: before the final reduce-scatter `param.grad` is still None
(the unsharded gradients live inside FSDP2), and after it each rank holds one shard; the norm of
that shard is not the gradient's norm, while `torch.nn.utils.clip_grad_norm_` on the DTensor
gradients reduces over all ranks and returns the global one.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from ..data import regression_data
from ..models import mlp
from .ddp import _wrap
from .fsdp import _mesh
from .shards import shard


def _norm(tensors) -> float:
    tensors = [t for t in tensors if t is not None]
    return (
        float(torch.linalg.vector_norm(torch.cat([t.reshape(-1) for t in tensors])))
        if tensors
        else 0.0
    )


def _micro(ctx, k, micro_batch, features, seed, device):
    data = regression_data(n=ctx.world_size * k * micro_batch, features=features, seed=seed)
    return [shard(data, ctx.rank, ctx.world_size, i, micro_batch).to(device) for i in range(k)]


def ddp_norms(ctx, *, k: int, micro_batch: int, features: int, hidden: int, seed: int) -> dict:
    """This rank's gradient norm before the last micro-step (local, under no_sync) and after it."""
    ddp = _wrap(mlp(features, hidden, seed=seed), ctx)
    before = None
    for i, mb in enumerate(_micro(ctx, k, micro_batch, features, seed, ctx.ddp_device)):
        if i == k - 1:
            before = _norm(p.grad for p in ddp.parameters())
        with contextlib.nullcontext() if i == k - 1 else ddp.no_sync():
            (F.mse_loss(ddp(mb.x), mb.y) / k).backward()
    return {"before_last": before, "after_sync": _norm(p.grad for p in ddp.parameters())}


def fsdp_norms(
    ctx, *, k: int, micro_batch: int, features: int, hidden: int, depth: int, seed: int,
    clip_to: float = 0.5,
) -> dict:  # fmt: skip
    """FSDP2 with set_requires_gradient_sync(False) until the last micro-step: what
    clip_grad_norm_ returns before the last micro-step and after it, this rank's shard norm, and
    the full gradient after clipping to `clip_to` × the norm."""
    from torch.distributed.fsdp import fully_shard

    device = ctx.fsdp_device
    mesh = _mesh(ctx, device)
    model = mlp(features, hidden, depth=depth, seed=seed).to(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    out = {}
    for i, mb in enumerate(_micro(ctx, k, micro_batch, features, seed, device)):
        last = i == k - 1
        if last:  # `inf`: measure only; clip_grad_norm_ then scales every gradient by 1
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
            out["before_last"] = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
            out["grads_before_last"] = sum(p.grad is not None for p in model.parameters())
        model.set_requires_gradient_sync(last)
        (F.mse_loss(model(mb.x), mb.y) / k).backward()
    out["shard_norm"] = _norm(p.grad.to_local() for p in model.parameters())
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    out["after_sync"] = float(norm.full_tensor())
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_to * out["after_sync"])
    out["clipped_grads"] = {
        n: p.grad.full_tensor().detach().cpu() for n, p in model.named_parameters()
    }
    out["clip_to"] = clip_to
    return out


def clipping(ctx, *, k: int, micro_batch: int, ddp_model: dict, fsdp_model: dict, seed: int = 0):
    out = {"ddp": ddp_norms(ctx, k=k, micro_batch=micro_batch, seed=seed, **ddp_model)}
    ctx.step("clipping DDP")
    out["fsdp"] = fsdp_norms(ctx, k=k, micro_batch=micro_batch, seed=seed, **fsdp_model)
    ctx.step("clipping FSDP2")
    return out
