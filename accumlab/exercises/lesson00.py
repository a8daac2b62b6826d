"""Lesson 00 exercises: the words of the lessons, and driving an explorer from code."""

from __future__ import annotations

import torch

from . import exercise


@exercise("00.1", 1, "Samples in one optimizer step")
def _samples_per_step(answer):
    # micro-batches of 6, k = 4, on 2 GPUs each running its own micro-batches: 6 · 4 · 2 = 48
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return "answer with a number"
    if answer == 24:
        return "that is one GPU's window: each GPU runs its own k micro-batches"
    if answer != 48:
        return "a window is micro-batch size × k samples, on each GPU"
    return None


@exercise("00.2", 1, "Drive an explorer from code")
def _explorer_setting(answer):
    # answer: lesson 00's explorer, set from code to zero_grad at the top of every iteration,
    # 24 samples in 3 micro-batches
    from ..explorer import Explorer

    if isinstance(answer, (tuple, list)):
        return (
            "answer with the explorer itself, after setting its controls from code "
            "(explorer.controls[...].value = ...): the checker reads them"
        )
    needed = {"micro_batch_size", "accumulation_steps", "zero_grad", "divide_by_k"}
    if not isinstance(answer, Explorer) or not needed <= set(answer.controls):
        return "answer with the explorer of this lesson, al.accumulation.accumulation_explorer()"
    values, data = answer.values, answer.data
    fresh = answer.compute(**values)
    same = (
        isinstance(data, dict)
        and data.get("samples") == fresh["samples"]
        and isinstance(data.get("accumulated"), torch.Tensor)
        and torch.equal(data["accumulated"], fresh["accumulated"])
    )
    if not same:
        return (
            "explorer.data is not what its controls compute: set the controls "
            "(explorer.controls[name].value = ...) and let the explorer compute"
        )
    k = fresh["accumulated"].shape[0]
    loop = (
        "zeroing once per window" if values["zero_grad"] == "window" else "zeroing every iteration"
    )
    seen = f"your explorer covers {fresh['samples']} samples in {k} micro-batches, {loop}"
    if fresh["samples"] != 24 or k != 3:
        return f"{seen}; the exercise asks for 24 samples in 3 micro-batches"
    if values["zero_grad"] != "every_micro_step":
        return f"{seen}; the exercise asks for the loop that calls zero_grad() at the top of every iteration"
    return None
