"""Lesson 07 on a real GPU: `python -m accumlab.record dist` writes accumlab/results/dist.json.

With one GPU: 2 ranks with gloo on CUDA tensors for DDP (NCCL refuses two ranks on one GPU), FSDP2
on CPU tensors, plus a 1-rank NCCL run; with N >= 2 GPUs: N ranks with NCCL, one per GPU.
"""

from __future__ import annotations

GPU_SWEEP = {
    "ks": (1, 2, 4, 8, 16),
    "micro_batches": (8, 64, 512),
    "repeats": 5,
    "features": 256,
    "hidden": 2048,
}


def record() -> dict:
    import torch

    from . import DistError, sync_experiments

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    sweep = GPU_SWEEP if gpus else None  # on CPU (testing the recorder) the lesson's small sweep
    world = max(2, gpus)
    runs = {"main": sync_experiments(world, sweep_options=sweep, timeout=600)}
    if gpus == 1:
        try:  # NCCL with its one rank: the GPU's own all-reduce path
            runs["nccl_one_rank"] = sync_experiments(
                1, parts=("ddp", "fsdp", "sweep"), sweep_options=sweep, timeout=600
            )
        except DistError as err:  # recorded as what happened, never silently dropped
            runs["nccl_one_rank"] = {"error": str(err)}
    return {"gpu_count": gpus, "runs": runs}
