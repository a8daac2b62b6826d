"""Lesson 07's recorder: `python -m accumlab.record dist` on a GPU writes accumlab/results/dist.json;
`--device cpu --out PATH` runs the same experiments on CPU processes (the tests do).

With one GPU: 2 ranks with gloo on CUDA tensors for DDP (NCCL refuses two ranks on one GPU) and
FSDP2 on CPU tensors; with N >= 2 GPUs: N ranks with NCCL, one per GPU. A one-rank NCCL run is
not recorded: with one rank there is nothing to all-reduce or shard, so its numbers mean nothing.
"""

from __future__ import annotations

from .._validate import one_of
from ..device import as_device

SWEEPS = {
    "full": {
        "ks": (1, 2, 4, 8, 16),
        "micro_batches": (8, 64, 512),
        "repeats": 5,
        "features": 256,
        "hidden": 2048,
    },
    "small": None,  # the lesson's own sweep
}

_COUNTS = {"allreduce_calls": int, "allreduce_bytes": int, "per_backward": [int]}
_FSDP = {
    "reduce_scatter_calls": int,
    "reduce_scatter_per_backward": [int],
    "all_gather_calls": int,
    "collectives_counted": bool,
    "held_grad_bytes": (int, type(None)),
    "grad_bytes_per_micro_step": [(int, type(None))],
    "vs_reference": {"max_rel": float},
}
SCHEMA = {
    "gpu_count": int,
    "runs": {
        "main": {
            "plan": {"world_size": int, "backend": str, "ddp_device_type": str},
            "world_size": int,
            "k": int,
            "ddp": {m: _COUNTS for m in ("every", "no_sync", "require_flag", "backward_only")},
            "ddp_buckets": {
                "grad_bytes": int,
                "gradient_as_bucket_view": {"false": dict, "true": dict},
            },
            "fsdp": {
                "param_bytes_full": int,
                "internals_error": (str, type(None)),
                "sync_each": _FSDP,
                "sync_last": _FSDP,
                "sync_last_keep": _FSDP,
            },
            "sweep": [
                {"ranks": int, "k": int, "micro_batch": int, "no_sync": bool, "step_time_s": float}
            ],
            "uneven": {"micro_batches": [int], "plain": {"finished": [bool]}},
            "clipping": {"ddp": {"after_sync": [float]}, "fsdp": {"after_sync": [float]}},
            "hsdp": dict,
            "accelerate": dict,
        }
    },
}


def record(device="cuda", size: str = "full") -> dict:
    """Every lesson-07 experiment on `device`'s processes, as plain data."""
    import torch

    from .lesson import sync_experiments

    one_of("size", size, SWEEPS)
    device = as_device(device)
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    run = sync_experiments(
        max(2, gpus),
        sweep_options=SWEEPS[size],
        timeout=600,
        device="auto" if gpus else "cpu",
    )
    return {"gpu_count": gpus, "runs": {"main": run}}
