"""Lesson 05 exercises: what memory holds, choosing k, and a loop that keeps no graph alive."""

from __future__ import annotations

import copy
import math

import torch

from . import exercise

# 05.2's numbers, given in the notebook
FLOOR = 3_000_000  # bytes: parameters + gradients + optimizer state
PER_SAMPLE = 40_000  # bytes of saved activations per sample, measured
BUDGET = 5_000_000
GLOBAL_BATCH = 192


@exercise("05.1", 1, "Adam's optimizer state")
def adam_state(answer):
    if not isinstance(answer, (int, float)) or isinstance(answer, bool):
        return "give a number of bytes"
    if answer == 4_000_000:
        return "that is one float32 per parameter; how many running averages does Adam keep?"
    if answer == 1_000_000 * 2:
        return "count bytes, not values: a float32 takes 4 bytes"
    if answer != 8_000_000:
        return "Adam keeps exp_avg and exp_avg_sq, each the shape and dtype of its parameter"
    return None


@exercise("05.2", 2, "Choose the micro-batch size and k")
def choose(answer):
    if (
        not isinstance(answer, tuple)
        or len(answer) != 2
        or not all(isinstance(a, int) for a in answer)
    ):
        return "give a tuple (micro_batch_size, k) of two integers"
    mb, k = answer
    if mb * k != GLOBAL_BATCH:
        return f"micro_batch_size × k must equal the global batch of {GLOBAL_BATCH}"
    if FLOOR + mb * PER_SAMPLE > BUDGET:
        if mb * PER_SAMPLE <= BUDGET:
            return "the floor (parameters + gradients + optimizer state) needs room too, whatever the micro-batch"
        return "that micro-batch's activations alone exceed the budget"
    largest = max(
        m
        for m in range(1, GLOBAL_BATCH + 1)
        if GLOBAL_BATCH % m == 0 and FLOOR + m * PER_SAMPLE <= BUDGET
    )
    if mb < largest:
        return "it fits, but a larger micro-batch also fits: fewer, larger micro-batches use the hardware better"
    return None


def _task():
    from ..data import regression_data
    from ..models import mlp

    model = mlp(features=8, hidden=32, outputs=1, depth=2, seed=1, dtype=torch.float64)
    data = regression_data(n=32, features=8, outputs=1, seed=1, dtype=torch.float64)
    return model, data


@exercise("05.3", 3, "Accumulate without keeping graphs alive")
def accumulate_lean(answer):
    from ..reference import full_batch_grads
    from ..saved import LiveSavedTensors, saved_tensor_bytes

    if not callable(answer):
        return "give a function accumulate(model, micro_batches)"
    model, data = _task()
    micro = data.micro_batches(8)
    mine = copy.deepcopy(model)
    with LiveSavedTensors(exclude=[*mine.parameters(), data.x, data.y]) as live:
        result = answer(mine, micro)
    if isinstance(result, torch.Tensor):
        return "return a Python number (a tensor keeps its graph, and every graph it was added to, alive)"
    if not isinstance(result, (int, float)):
        return "return the mean loss over all micro-batches as a Python float"
    with torch.no_grad():
        full_loss = float(torch.nn.functional.mse_loss(model(data.x), data.y))
    if not math.isclose(result, full_loss, rel_tol=1e-9):
        return "the returned loss should be the mean over all samples (the mean of the k micro-batch means)"
    ref = full_batch_grads(model, data, loss="mse")
    got = dict(mine.named_parameters())
    if any(got[n].grad is None for n in ref):
        return "after your function every parameter should hold a .grad"
    if not all(torch.allclose(got[n].grad, ref[n], rtol=1e-9, atol=1e-12) for n in ref):
        return "the accumulated gradient differs from the full batch's: what is each micro-batch's loss divided by?"
    one = saved_tensor_bytes(lambda: mine(micro[0].x), exclude=[*mine.parameters(), data.x, data.y])
    if live.peak > one * 1.5:
        return f"the gradient is right, but {live.peak} bytes of activations were alive at once: one micro-batch needs about {one}"
    return None
