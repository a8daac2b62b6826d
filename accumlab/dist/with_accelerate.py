"""The real Accelerate in the lesson's ranks: `GradientAccumulationPlugin(sync_each_batch=...)`
(lesson 07). `accelerator.accumulate(model)` enters DDP's `no_sync()` on every micro-step but the
window's last, unless `sync_each_batch=True`; the all-reduces are counted with the same
communication hook as the lesson's own loops.
"""

from __future__ import annotations

import os

import torch.nn.functional as F

from ..data import regression_data
from ..engine import grads_of
from ..models import mlp
from .comm import CommCounter, count_allreduce
from .ddp import _cpu
from .shards import shard


def _torchrun_environment(ctx) -> None:
    # what torchrun would set: Accelerate reads its world from these, then finds the process
    # group already initialised and joins it instead of starting another
    os.environ.update(
        RANK=str(ctx.rank), LOCAL_RANK=str(ctx.local_rank), WORLD_SIZE=str(ctx.world_size),
        LOCAL_WORLD_SIZE=str(ctx.world_size), MASTER_ADDR="127.0.0.1",
    )  # fmt: skip
    os.environ.setdefault("MASTER_PORT", "29500")  # read, never bound: the group exists


def accelerate_sync(
    ctx, *, k: int = 4, micro_batch: int = 8, features: int = 4, hidden: int = 16, seed: int = 0
) -> dict:
    """For sync_each_batch False and True: all-reduces per micro-step under
    `accelerator.accumulate`, and the accumulated gradient (Accelerate divides the loss by k)."""
    if ctx.group is not None:  # torchrun, ranks sharing a GPU: Accelerate would use the NCCL group
        return {"skipped": "ranks share a GPU under torchrun: Accelerate is not run on that group"}
    _torchrun_environment(ctx)
    import accelerate
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState
    from accelerate.utils import GradientAccumulationPlugin

    data = regression_data(n=ctx.world_size * k * micro_batch, features=features, seed=seed)
    out = {"version": accelerate.__version__}
    for each in (False, True):
        AcceleratorState._reset_state(reset_partial_state=True)  # a fresh Accelerator per variant
        GradientState._reset_state()
        acc = Accelerator(
            # Accelerate gives rank r the GPU cuda:r (DDP's device_ids=[local_process_index]):
            # ranks sharing one GPU run it on CPU tensors instead
            cpu=ctx.plan.backend != "nccl",
            gradient_accumulation_plugin=GradientAccumulationPlugin(
                num_steps=k, sync_each_batch=each
            ),
        )
        model = acc.prepare(mlp(features, hidden, seed=seed))
        counter = CommCounter()
        count_allreduce(model, counter)
        for i in range(k):
            mb = shard(data, ctx.rank, ctx.world_size, i, micro_batch).to(acc.device)
            with acc.accumulate(model):
                acc.backward(F.mse_loss(model(mb.x), mb.y))  # divides by k itself
            counter.end_backward()
        out[str(each).lower()] = {
            **counter.as_dict(),
            "wrapped_in": type(model).__name__,
            "device": acc.device.type,
            "grads": _cpu(grads_of(acc.unwrap_model(model))),
        }
        ctx.step(f"Accelerate sync_each_batch={each}")
    return out
