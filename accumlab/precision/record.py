"""Lesson 06's recorder: float16 autocast + GradScaler with accumulation, right order and wrong,
and how precise accumulation is in each dtype. `python -m accumlab.record amp` on a GPU writes
accumlab/results/amp.json; `--device cpu --out PATH` runs the same code on the CPU with float16
autocast too: the same code path, but a GPU's float16 kernels round differently, so its skipped
windows may differ.
"""

from __future__ import annotations

from .._validate import one_of
from ..device import as_device
from .amp import AMP_ORDERS
from .amp_runs import amp_demo, amp_error
from .dtypes import accumulation_errors

SIZES = {"full": {"n": 64, "ks": [1, 4, 16, 64, 256]}, "small": {"n": 64, "ks": [1, 4, 16]}}
DTYPE = "float16"  # what GradScaler exists for; on both devices, so both run the same code path

_TRACE = {
    "micro_scales": [float],
    "window_scales": [float],
    "skipped": [bool],
    "update_norms": [float],
    "scale_changes_inside_windows": int,
    "grad_rel_l2_vs_float32": [float],
}
SCHEMA = {
    "size": str,
    "device_type": str,
    "autocast_dtype": str,
    "micro_batch_size": int,
    "accumulation_steps": int,
    "overflow_micro_steps": [int],
    "reference_skipped": [bool],
    "reference_update_norms": [float],
    "orders": {"correct": _TRACE, "unscale_update_every_micro_step": _TRACE},
    "errors": {order: (str, type(None)) for order in AMP_ORDERS},
    "accumulation_errors": {"ks": [int], "errors": {"float16": [float], "float32": [float]}},
}


def record(device="cuda", size: str | None = None) -> dict:
    """Every lesson-06 GPU measurement on `device`, with float16 autocast, as plain data (size:
    default full on a GPU, small on the CPU). Lesson 06 runs it live in its GPU section."""
    device = as_device(device)
    size = size or ("full" if device.type == "cuda" else "small")
    one_of("size", size, SIZES)
    cfg = SIZES[size]
    demo = amp_demo(
        ("correct", "unscale_update_every_micro_step"), device=device, dtype=DTYPE, n=cfg["n"]
    )
    traces = {
        order: {
            "micro_scales": t.micro_scales,
            "window_scales": t.window_scales,
            "skipped": t.skipped,
            "update_norms": t.update_norms,
            "scale_changes_inside_windows": t.scale_changes_inside_windows,
            "grad_rel_l2_vs_float32": demo["grad_errors"][order],
        }
        for order, t in demo["traces"].items()
    }
    ref = demo["reference"]
    return {
        "size": size,
        "device_type": device.type,
        "autocast_dtype": DTYPE,
        "micro_batch_size": 4,
        "accumulation_steps": 4,
        "overflow_micro_steps": [5],
        "reference_skipped": ref.skipped,
        "reference_update_norms": ref.update_norms,
        "orders": traces,
        "errors": {order: amp_error(order, device=device, dtype=DTYPE) for order in AMP_ORDERS},
        # accumulate on the device itself, in float16, bfloat16 and float32 buffers
        "accumulation_errors": accumulation_errors(
            cfg["ks"], ("float16", "bfloat16", "float32"), device=device
        ),
    }
