"""Lesson 05's recorder: the measured peak and step time against the micro-batch size at a fixed
global batch, the optimizer step's temporaries, what the caching allocator reserved, gradient
checkpointing vs accumulation, and the micro-batch size chosen for a budget by estimate and by
probe. `python -m accumlab.record memory` on a GPU; `--device cpu --out PATH` runs the same code on
the CPU (small sizes)."""

from __future__ import annotations

from .._validate import one_of
from ..device import as_device
from .choose_k import choose_micro_batch, floor_bytes
from .parts import activation_bytes, data_bytes, memory_setup, param_bytes
from .peaks import memory_sweep, step_peak, step_transient_bytes
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
        # room above the floor for the data and saved activations of this many samples, a fifth
        # of the global batch: the probe needs k > 1 (on a CPU it picked 1024, k = 4); the estimate
        # may still fit the whole batch, since at k = 1 no gradients exist during the forward
        "budget_samples": 800,
    },
    # the same code on a few KiB: what the tests run on a CPU
    "small": {
        "width": 32,
        "depth": 2,
        "global_batch": 256,
        "micro_sizes": [256, 64, 16],
        "segments": 2,
        "checkpoint_micro_batch": 64,
        "repeats": 1,
        "budget_samples": 50,
    },
}
OPTIMIZER = "adamw"

_INTS = [int]
_CHOICE = {
    "budget_bytes": int,
    "floor_bytes": int,
    "micro_batch_size": int,
    "accumulation_steps": int,
    "method": str,
    "tried": [[(int, bool)]],
    "needed": [(int, type(None))],
}
_OPT_INTS = [(int, type(None))]
SCHEMA = {
    "size": str,
    "per_sample": {"activations": int, "data": int},
    "allocator": {
        "micro_sizes": _INTS,
        "allocated": _INTS,
        "reserved": _OPT_INTS,
    },
    "model": {"width": int, "depth": int, "dtype": str, "optimizer": str},
    "transient": {"params": int, "foreach": int, "per_parameter": int},
    "memory": {
        "global_batch": int,
        "micro_sizes": _INTS,
        "accumulation_steps": _INTS,
        "activations": _INTS,
        "data": _INTS,
        "estimate": _INTS,
        "peak": [(int, type(None))],
        "resting": int,
        "floor": int,
        "parts": {
            "parameters": int,
            "optimizer state": int,
            "gradients": int,
            "optimizer-step temporaries": int,
        },
        "optimizer": str,
        "device": str,
    },
    "step_time": {
        "global_batch": int,
        "micro_sizes": _INTS,
        "accumulation_steps": _INTS,
        "seconds": [float],
        "device": str,
    },
    "checkpointing": {
        "global_batch": int,
        "resting": int,
        "floor": int,
        "rows": [
            {
                "name": str,
                "micro_batch_size": int,
                "segments": int,
                "activations": int,
                "seconds": float,
                "peak": int,
            }
        ],
        "device": str,
    },
    "choice": _CHOICE,
    "estimate_choice": _CHOICE,
}


def _choice(c) -> dict:
    return {
        "budget_bytes": c.budget_bytes,
        "floor_bytes": c.floor_bytes,
        "micro_batch_size": c.micro_batch_size,
        "accumulation_steps": c.accumulation_steps,
        "method": c.method,
        "tried": [list(t) for t in c.tried],
        "needed": list(c.needed),
    }


def record(device="cuda", size: str | None = None) -> dict:
    """Every lesson-05 measurement on `device` at `size` ("full" or "small"; default: full on a
    GPU, small on the CPU), as plain data. Lesson 05 runs it live in its GPU section."""
    device = as_device(device)
    size = size or ("full" if device.type == "cuda" else "small")
    one_of("size", size, SIZES)
    cfg = SIZES[size]
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
    # what one more sample costs while its micro-batch is on the device
    one = data[:1]
    per_sample = {"activations": activation_bytes(model, one), "data": data_bytes(one)}
    budget = floor_bytes(model, OPTIMIZER) + cfg["budget_samples"] * sum(per_sample.values())
    # the allocator's view of one step, the whole batch at once and the smallest micro-batch
    ends = [cfg["micro_sizes"][0], cfg["micro_sizes"][-1]]
    peaks = [step_peak(model, data, m, optimizer=OPTIMIZER) for m in ends]
    return {
        "size": size,
        "per_sample": per_sample,
        "allocator": {
            "micro_sizes": ends,
            "allocated": [p.peak for p in peaks],
            "reserved": [p.reserved for p in peaks],
        },
        "model": {
            "width": cfg["width"],
            "depth": cfg["depth"],
            "dtype": "float32",
            "optimizer": OPTIMIZER,
        },
        "transient": {
            "params": param_bytes(model),
            "foreach": step_transient_bytes(model, OPTIMIZER, foreach=True),
            "per_parameter": step_transient_bytes(model, OPTIMIZER, foreach=False),
        },
        "memory": memory,
        "step_time": timing,
        "checkpointing": checkpointing,
        "choice": _choice(
            choose_micro_batch(model, data, budget, optimizer=OPTIMIZER, method="probe")
        ),
        "estimate_choice": _choice(
            choose_micro_batch(model, data, budget, optimizer=OPTIMIZER, method="estimate")
        ),
    }
