"""FSDP2 (`fully_shard`) under gradient accumulation, run inside each rank (lesson 07).

`set_requires_gradient_sync(False)` on micro-steps 0..k-2 skips the reduce-scatter, but each rank
then keeps UNSHARDED gradients until the last micro-step; syncing every micro-step keeps only the
rank's shard of the gradient, paid for with a reduce-scatter per micro-step. Adding
`set_reshard_after_backward(False)` on those micro-steps also keeps the unsharded PARAMETERS, so
the next forward needs no all-gather: more memory, less communication.

Counting collectives and reading unsharded bytes relies on FSDP2 internals
(`torch.distributed.fsdp._fully_shard._fsdp_collectives`, `FSDPModule._get_fsdp_state`); when
they are missing the results say so (`counted=False`, `internals_error`) and the report's checks
fail, rather than passing on zeros.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from ..data import regression_data
from ..device import MemoryMeter, synchronize
from ..models import mlp
from .comm import CommCounter, count_fsdp_collectives
from .shards import shard

# sync_each        — reduce-scatter after every backward (the default)
# sync_last        — set_requires_gradient_sync(False) on micro-steps 0..k-2
# sync_last_keep   — also set_reshard_after_backward(False) on them: parameters stay unsharded
# sync_last_keep_all — and set_reshard_after_forward(False): not freed after the forward either
FSDP_VARIANTS = ("sync_each", "sync_last", "sync_last_keep", "sync_last_keep_all")


class FsdpInternalsChanged(RuntimeError):
    """The installed torch's FSDP2 no longer has the private attributes this lesson reads."""


def _regions(tensors) -> dict:
    # one entry per storage, counted whole: FSDP2's sharded gradients are views into one padded
    # reduce-scatter output, so a rank whose views cover fewer rows still holds every padded row
    return {
        (t.device, t.untyped_storage().data_ptr()): t.untyped_storage().nbytes() for t in tensors
    }


def unsharded_tensors(model) -> dict:
    """FSDP2's unsharded gradients and unsharded parameters on this rank right now, read from its
    internals; FsdpInternalsChanged when they are not there."""
    from torch.distributed.fsdp import FSDPModule

    grads, params = [], []
    try:
        for m in model.modules():
            if not isinstance(m, FSDPModule):
                continue
            for group in m._get_fsdp_state()._fsdp_param_groups:
                for fp in group.fsdp_params:
                    p = fp._unsharded_param if hasattr(fp, "_unsharded_param") else None
                    if p is not None and p.grad is not None:  # kept even after resharding
                        grads.append(p.grad)
                    # a resharded parameter keeps its tensor, with storage resized to 0 bytes
                    if p is not None and p.untyped_storage().nbytes() > 0:
                        params.append(p)
                    if fp.unsharded_accumulated_grad is not None:
                        grads.append(fp.unsharded_accumulated_grad)
    except AttributeError as err:
        raise FsdpInternalsChanged(
            f"torch {torch.__version__}: FSDP2's internals differ from what this lesson reads "
            f"({err}); unsharded bytes cannot be measured"
        ) from None
    return {"grads": grads, "params": params}


def held_bytes(model) -> dict:
    """This rank's gradient bytes: shards (`param.grad`, public) and FSDP2's unsharded gradients
    and parameters (internals; None, with the reason, when they cannot be read). A tensor seen
    both ways (an unsharded parameter is the module's parameter until it is resharded) counts once."""
    public = []
    for p in model.parameters():
        if p.grad is not None:
            public.append(p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad)
    try:
        inside, error = unsharded_tensors(model), None
    except FsdpInternalsChanged as err:
        inside, error = None, str(err)
    unsharded = _regions(inside["grads"]) if inside else None
    shards = {
        key: n for key, n in _regions(public).items() if not unsharded or key not in unsharded
    }
    return {
        "sharded": sum(shards.values()),
        "unsharded": sum(unsharded.values()) if inside else None,
        "total": sum({**shards, **unsharded}.values()) if inside else None,
        "unsharded_params": sum(_regions(inside["params"]).values()) if inside else None,
        "error": error,
    }


def gradient_storages(model, *tensors) -> int:
    """Bytes of the gradient storages alive on this rank now: the shards (`param.grad`), FSDP2's
    unsharded gradients (internals; skipped when missing) and `tensors` (a reduce-scatter's input
    and output), each storage counted once and whole."""
    grads = [p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
             for p in model.parameters() if p.grad is not None]  # fmt: skip
    try:
        grads += unsharded_tensors(model)["grads"]
    except FsdpInternalsChanged:
        pass
    return sum(_regions([*grads, *tensors]).values())


def _warm_up(mesh, device: str, features: int, hidden: int, depth: int, seed: int) -> None:
    """One synced forward and backward of a throwaway FSDP2 model before anything is measured:
    first uses allocate and keep memory (on a GPU, cuBLAS's workspace per thread and stream)."""
    from torch.distributed.fsdp import fully_shard

    model = mlp(features, hidden, depth=depth, seed=seed).to(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    x = regression_data(n=2, features=features, seed=seed).x.to(device)
    model(x).sum().backward()
    synchronize(device)


def _mesh(ctx, device: str):
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

    kind = torch.device(device).type
    if ctx.group is not None:  # torchrun with ranks sharing a GPU: the gloo group it created
        return DeviceMesh.from_group(ctx.group, kind)
    # explicit: without a mesh FSDP2 picks CUDA whenever a GPU exists, even for a CPU group
    return init_device_mesh(kind, (ctx.world_size,))


def accumulation_dtypes(ctx, *, features: int = 16, hidden: int = 64, seed: int = 0) -> dict:
    """The dtype FSDP2 keeps unsharded gradients in between micro-steps without sync, with
    `MixedPrecisionPolicy(param_dtype=bfloat16)` and reduce_dtype None or float32 (internals:
    None, with the reason, when they cannot be read). Lesson 06 cites it."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    device = ctx.fsdp_device
    mesh = _mesh(ctx, device)
    x = regression_data(n=4, features=features, seed=seed).x.to(device)
    out = {}
    for name, reduce in (("None", None), ("float32", torch.float32)):
        model = mlp(features, hidden, depth=1, seed=seed, dtype=torch.float32).to(device)
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce)
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        model.set_requires_gradient_sync(False)  # a micro-step before the last
        model(x).float().sum().backward()
        try:
            grads = unsharded_tensors(model)["grads"]
            out[name] = sorted({str(g.dtype).removeprefix("torch.") for g in grads})
        except FsdpInternalsChanged as err:
            out[name] = None
            out["error"] = str(err)
    return out


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
    """Each FSDP_VARIANT for one optimizer step: collectives per micro-step, bytes held after
    every micro-step, the most bytes each backward allocated above its start, time, the
    parameter shapes and the full (all-gathered) gradient."""
    from torch.distributed.fsdp import fully_shard

    device = ctx.fsdp_device
    mesh = _mesh(ctx, device)
    data = regression_data(n=ctx.world_size * k * micro_batch, features=features, seed=seed)
    micro = [shard(data, ctx.rank, ctx.world_size, i, micro_batch).to(device) for i in range(k)]
    _warm_up(mesh, device, features, hidden, depth, seed)
    out = {}
    for variant in FSDP_VARIANTS:
        model = mlp(features, hidden, depth=depth, seed=seed).to(device)
        full_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        shapes = [list(p.shape) for p in model.parameters()]
        units = [  # one FSDP unit per Linear: the gradient bytes each unshards during backward
            sum(p.numel() * p.element_size() for p in layer.parameters())
            for layer in model
            if isinstance(layer, torch.nn.Linear)
        ]
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)  # one FSDP unit per Linear: shard, gather, free
        fully_shard(model, mesh=mesh)
        if variant == "sync_last_keep_all":
            model.set_reshard_after_forward(False)  # every unit keeps its parameters after forward
        rs, ag = CommCounter(), CommCounter()
        at_rs = [0]  # this micro-step's most gradient bytes alive at one of its reduce-scatters

        def reading(output, inp, model=model, at_rs=at_rs):
            at_rs[-1] = max(at_rs[-1], gradient_storages(model, output, inp))

        counted = count_fsdp_collectives(model, rs, ag, at_reduce_scatter=reading)
        held, extra = [], []
        synchronize(device)
        t0 = time.perf_counter()
        for i, mb in enumerate(micro):
            last = i == k - 1
            model.set_requires_gradient_sync(variant == "sync_each" or last)
            if variant.startswith("sync_last_keep"):
                model.set_reshard_after_backward(last)  # keep parameters unsharded until the end
            loss = F.mse_loss(model(mb.x), mb.y) / k
            # held_bytes reads memory BETWEEN micro-steps; during a backward a unit's unsharded
            # gradient and the reduce-scatter's buffers exist on top of it, for a moment
            with MemoryMeter(device) as meter:
                loss.backward()
            extra.append(meter.peak)  # the most allocated at once above the backward's start
            at_rs.append(0)
            rs.end_backward()
            ag.end_backward()  # all-gathers of this micro-step: its forward and its backward
            held.append(held_bytes(model))
        synchronize(device)
        seconds = time.perf_counter() - t0
        grads = {n: p.grad.full_tensor().detach().cpu() for n, p in model.named_parameters()}
        out[variant] = {
            "reduce_scatter": rs.as_dict(),
            "all_gather": ag.as_dict(),
            "counted": counted,
            "grad_bytes": held,
            "backward_extra_bytes": extra,
            # gradient storages alive at the reduce-scatter, per micro-step (0: it had none):
            # the unit's whole gradient, flattened into the collective's input, beside the shards
            "grad_bytes_at_reduce_scatter": at_rs[:k],
            "seconds": seconds,
            "grads": grads,
            "param_bytes_full": full_bytes,
            "param_shapes": shapes,
            # what every rank holds once sharded: FSDP2 pads dimension 0 so that each rank's
            # storage has ceil(rows / ranks) rows of each parameter (padding included)
            "shard_bytes_expected": sum(
                -(-p.shape[0] // ctx.world_size) * p[0].numel() * p.element_size()
                for p in mlp(features, hidden, depth=depth, seed=seed).parameters()
            ),
            "unit_bytes": units,
        }
        ctx.step(f"FSDP {variant}")
    out["accumulation_dtypes"] = accumulation_dtypes(
        ctx, features=features, hidden=hidden, seed=seed
    )
    out["reduce_ops"] = sorted(rs.ops)  # of the last variant: every variant reduces the same way
    out["default_mesh"] = default_mesh(ctx)
    return out


def default_mesh(ctx) -> dict:
    """The mesh `fully_shard` builds when given none. torch's `_init_default_mesh` builds it on
    the device type of `torch._C._get_accelerator()`: CUDA when a GPU is usable, the CPU on a
    machine without one. Built here only when that is the CPU and this rank's group is the
    default gloo one; with a GPU it would be a CUDA mesh, which the lesson's CPU groups cannot
    use (hence the explicit `init_device_mesh` in `_mesh`)."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    find = getattr(torch._C, "_get_accelerator", None)  # what _init_default_mesh calls
    kind = find().type if find is not None else None
    out = {"accelerator": kind, "mesh_device": None, "mesh_ranks": None}
    if kind == "cpu" and ctx.group is None and dist.get_backend() == "gloo":
        layer = fully_shard(torch.nn.Linear(4, 4, dtype=torch.float64))  # no mesh given
        mesh = layer.weight.device_mesh
        out.update(mesh_device=mesh.device_type, mesh_ranks=mesh.size())
    return out
