"""Lesson 06 on a GPU: float16 autocast + GradScaler with accumulation, right order and wrong.

`python -m accumlab.record amp` runs this on CUDA (float16) and writes accumlab/results/amp.json;
with --allow-cpu it runs the same code with CPU bfloat16, only to test the recorder itself.
"""

from __future__ import annotations

import torch

from .amp import AMP_ORDERS, amp_demo, amp_error
from .dtypes import accumulation_errors


def record() -> dict:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    demo = amp_demo(("correct", "unscale_update_every_micro_step"), device=device, n=64)
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
    first = next(iter(demo["traces"].values()))
    # on the GPU, accumulate in float16 and float32 on the device itself
    sweep = accumulation_errors(
        [1, 4, 16, 64, 256], ("float16", "bfloat16", "float32"), device=device
    )
    return {
        "device_type": device,
        "autocast_dtype": first.dtype,
        "micro_batch_size": 4,
        "accumulation_steps": 4,
        "overflow_micro_steps": [5],
        "reference_skipped": ref.skipped,
        "reference_update_norms": ref.update_norms,
        "orders": traces,
        "errors": {order: amp_error(order, device=device) for order in AMP_ORDERS},
        "accumulation_errors": sweep,
    }
