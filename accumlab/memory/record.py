"""Lesson 05's GPU reference: peak memory and step time against the micro-batch size at a fixed
global batch, gradient checkpointing vs accumulation, and a micro-batch size chosen by probing
for out-of-memory errors. Run `python -m accumlab.record memory` on a GPU machine.

ACCUMLAB_RECORD_SIZE=small shrinks every size, so a test can run the whole recorder on a CPU in
about a second (`--allow-cpu`); such a file is a test artefact, never a reference result.
"""

from __future__ import annotations

import os

import torch

from .choose_k import choose_micro_batch, floor_bytes
from .parts import memory_setup, memory_sweep
from .throughput import checkpoint_comparison, step_time_sweep

SIZES = {
    # an 8-layer 2048-wide MLP and a 4096-sample global batch: large enough that a GPU's memory
    # and speed behave as in real training, small enough to record in about a minute
    "full": {
        "width": 2048,
        "depth": 8,
        "global_batch": 4096,
        "micro_sizes": [4096, 2048, 1024, 512, 256, 128, 64, 32],
        "segments": 3,
        "checkpoint_micro_batch": 512,
        "repeats": 5,
        "budget_above_floor": 256 * 2**20,
    },
    "small": {
        "width": 32,
        "depth": 2,
        "global_batch": 16,
        "micro_sizes": [16, 8, 4],
        "segments": 2,
        "checkpoint_micro_batch": 4,
        "repeats": 1,
        "budget_above_floor": 16 * 2**10,
    },
}
OPTIMIZER = "adamw"


def record(size: str | None = None) -> dict:
    """Run every lesson-05 measurement on the GPU (the CPU only when testing) and return them."""
    size = size or os.environ.get("ACCUMLAB_RECORD_SIZE", "full")
    if size not in SIZES:
        raise ValueError(f"ACCUMLAB_RECORD_SIZE must be one of {', '.join(SIZES)}, got {size!r}")
    cfg = SIZES[size]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, data = memory_setup(cfg["width"], cfg["depth"], cfg["global_batch"], device=device)
    memory = memory_sweep(model, data, cfg["micro_sizes"], optimizer=OPTIMIZER, progress=True)
    timing = step_time_sweep(
        model, data, cfg["micro_sizes"], optimizer=OPTIMIZER, repeats=cfg["repeats"]
    )
    checkpointing = checkpoint_comparison(
        model,
        data,
        cfg["checkpoint_micro_batch"],
        cfg["segments"],
        optimizer=OPTIMIZER,
        repeats=cfg["repeats"],
    )
    budget = floor_bytes(model, OPTIMIZER) + cfg["budget_above_floor"]
    choice = choose_micro_batch(model, data, budget, optimizer=OPTIMIZER)
    return {
        "size": size,
        "model": {
            "width": cfg["width"],
            "depth": cfg["depth"],
            "dtype": "float32",
            "optimizer": OPTIMIZER,
        },
        "memory": memory,
        "step_time": timing,
        "checkpointing": checkpointing,
        "choice": {
            "budget_bytes": choice.budget_bytes,
            "floor_bytes": choice.floor_bytes,
            "micro_batch_size": choice.micro_batch_size,
            "accumulation_steps": choice.accumulation_steps,
            "method": choice.method,
            "tried": [list(t) for t in choice.tried],
        },
    }
