"""What each rank of lesson 12's pipeline runs: one stage of a small MLP under torch's own
`torch.distributed.pipelining` schedules (`PipelineStage`, `ScheduleGPipe`, `Schedule1F1B`).

`pipeline_task(ctx, ...)` is started by `accumlab.dist.launch` on every rank. It runs each
experiment on the same process group and returns this rank's gradients, the order in which its
stage ran forward and backward passes, and their times. `accumlab.scale.pipeline` compares them
with single-process references.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from ..data import regression_data
from ..models import mlp

# the model whose gradients are checked (float64: any difference is a bug, not rounding)
PIPE_MODEL = {"features": 8, "hidden": 16, "depth": 3}
MICRO_BATCHES = 4
MICRO_BATCH_SIZE = 4

# name -> (schedule, micro-batches, scale_grads, optimizer steps accumulated without zeroing)
EXPERIMENTS = {
    "gpipe": ("GPipe", MICRO_BATCHES, True, 1),
    "1f1b": ("1F1B", MICRO_BATCHES, True, 1),
    "gpipe_m1": ("GPipe", 1, True, 1),  # fewer micro-batches than stages
    "no_scale": ("GPipe", MICRO_BATCHES, False, 1),  # mean loss, schedule does not divide by m
    "two_steps_scaled": ("GPipe", MICRO_BATCHES, True, 2),  # accumulate two step() calls
    "two_steps_fixed": ("GPipe", MICRO_BATCHES, False, 2),  # loss / (m · steps), no rescale
    # section 1's fix under a pipeline: a MainGrad hook moves each .grad into its buffer and sets
    # .grad = None, so scale_grads (which divides only a .grad that is not None) never reaches it
    "main_grad": ("GPipe", MICRO_BATCHES, True, 1),
    "main_grad_fixed": ("GPipe", MICRO_BATCHES, False, 1),  # the loss divided by m instead
}
MAIN_GRAD_EXPERIMENTS = ("main_grad", "main_grad_fixed")  # gradients read from MainGrad buffers


def pipe_model(seed: int = 0, *, dtype=torch.float64, **sizes) -> nn.Sequential:
    """The full model every rank builds identically before keeping its own stage."""
    return mlp(**(sizes or PIPE_MODEL), seed=seed, dtype=dtype)


def split_stages(model: nn.Sequential, stages: int) -> list[tuple[int, nn.Sequential]]:
    """Cut `model` into `stages` contiguous pieces at Linear layers; (first layer index, piece)."""
    cuts = [i for i, layer in enumerate(model) if isinstance(layer, nn.Linear)]
    if stages > len(cuts):
        raise ValueError(f"stages must be at most the number of Linear layers ({len(cuts)})")
    per = len(cuts) / stages
    starts = [cuts[round(s * per)] for s in range(stages)] + [len(model)]
    return [(a, nn.Sequential(*model[a:b])) for a, b in zip(starts, starts[1:])]


def batches(steps: int, micro_batches: int, seed: int) -> list:
    """One `al.Data` per optimizer step, `micro_batches × MICRO_BATCH_SIZE` samples each."""
    n = micro_batches * MICRO_BATCH_SIZE
    data = regression_data(n=steps * n, features=PIPE_MODEL["features"], seed=seed)
    return [data[i * n : (i + 1) * n] for i in range(steps)]


def _global_names(piece: nn.Sequential, offset: int) -> dict[str, str]:
    # the piece renumbers its layers from 0; report names as the full model spells them
    out = {}
    for name, _ in piece.named_parameters():
        index, rest = name.split(".", 1)
        out[name] = f"{offset + int(index)}.{rest}"
    return out


def _record(stage) -> list:
    """Log (kind, micro-batch) of every pass this stage runs, in the order it runs them."""
    log: list[tuple[str, int]] = []
    for kind, method in (("F", "forward_one_chunk"), ("B", "backward_one_chunk")):
        inner = getattr(stage, method)

        def logged(chunk_id, *args, _inner=inner, _kind=kind, **kwargs):
            log.append((_kind, int(chunk_id)))
            return _inner(chunk_id, *args, **kwargs)

        setattr(stage, method, logged)  # on this instance only: the schedule calls it by name
    return log


def run_schedule(
    ctx, piece, schedule, micro_batches, loss_fn, scale_grads, steps_data, main_grad=False
) -> dict:
    """One fresh stage under `schedule`, one `step()` per item of `steps_data`, never zeroing the
    gradients in between. Returns the module, the passes of each step in the order run and, with
    `main_grad`, the MainGrad whose hooks took every `.grad` (else None)."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    from .accumulator import MainGrad

    module = copy.deepcopy(piece)
    dtype = next(module.parameters()).dtype
    main = MainGrad(module, dtype=dtype) if main_grad else None  # hooks before the stage wraps it
    stage = PipelineStage(module, ctx.rank, ctx.world_size, torch.device("cpu"))
    cls = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}[schedule]
    sched = cls(stage, n_microbatches=micro_batches, loss_fn=loss_fn, scale_grads=scale_grads)
    log = _record(stage)
    orders = []
    for data in steps_data:
        first = len(log)
        if ctx.rank == 0:  # the first stage gets the inputs, the last the targets
            sched.step(data.x.to(dtype))
        elif ctx.rank == ctx.world_size - 1:
            sched.step(target=data.y.to(dtype))
        else:
            sched.step()
        orders.append(log[first:])
    if main is not None:
        main.remove()
    return {"module": module, "orders": orders, "main_grad": main}


def _mse(output, target):
    return F.mse_loss(output, target)


class _ScaledMSE:
    """MSE divided by a constant: the loss-side fix for accumulating several pipeline steps."""

    def __init__(self, divisor: int):
        self.divisor = divisor

    def __call__(self, output, target):
        return F.mse_loss(output, target) / self.divisor


def pipeline_task(ctx, *, experiments=tuple(EXPERIMENTS), seed: int = 0) -> dict:
    """Runs on every rank: each experiment of EXPERIMENTS on the same process group."""
    offset, piece = split_stages(pipe_model(seed), ctx.world_size)[ctx.rank]
    names = _global_names(piece, offset)
    out = {"grads": {}, "orders": {}, "errors": {}, "first_layer": offset}
    for name in experiments:
        schedule, m, scale, steps = EXPERIMENTS[name]
        fixed = name in ("two_steps_fixed", "main_grad_fixed")
        loss_fn = _ScaledMSE(m * steps) if fixed else _mse
        hooked = name in MAIN_GRAD_EXPERIMENTS
        data = batches(steps, m, seed)
        run = run_schedule(ctx, piece, schedule, m, loss_fn, scale, data, main_grad=hooked)
        if hooked:
            grads = {n: b.clone() for n, b in run["main_grad"].buffers.items()}
        else:
            grads = {n: p.grad.clone() for n, p in run["module"].named_parameters()}
        out["grads"][name] = {names[n]: g for n, g in grads.items()}
        out["orders"][name] = run["orders"][0]
        ctx.step(name)
    try:  # torch refuses 1F1B with fewer micro-batches than stages: record its words
        run_schedule(ctx, piece, "1F1B", 1, _mse, True, batches(1, 1, seed))
        out["errors"]["1f1b_m1"] = None
    except ValueError as err:
        out["errors"]["1f1b_m1"] = f"ValueError: {err}"
    return out
