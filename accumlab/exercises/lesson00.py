"""Lesson 00 exercises: the words of the lessons, and driving an explorer from code."""

from __future__ import annotations

import torch

from . import exercise
from ._answers import integer


@exercise("00.1", 1, "Samples in one optimizer step")
def _samples_per_step(answer):
    # micro-batches of 6, k = 4, on 2 GPUs each running its own micro-batches: 6 · 4 · 2 = 48
    n = integer(answer)  # 48, 48.0, np.int64(48), torch.tensor(48) alike; 48.5 gets a hint
    wrong = {
        24: "that is one GPU's window: each GPU runs its own k micro-batches",
        12: "each GPU runs k micro-batches before the step, not one",
        8: "count the samples: each micro-batch holds 6 of them",
    }
    return (
        None if n == 48 else wrong.get(n, "a window is micro-batch size × k samples, on each GPU")
    )


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
    every = values["zero_grad"] == "every_micro_step"
    loop = "zeroing every iteration" if every else "zeroing once per window"
    seen = f"your explorer covers {fresh['samples']} samples in {k} micro-batches, {loop}"
    if fresh["samples"] != 24 or k != 3:
        return f"{seen}; the exercise asks for 24 samples in 3 micro-batches"
    if not every:
        return f"{seen}; the exercise asks for the loop that calls zero_grad() at the top of every iteration"
    return None
