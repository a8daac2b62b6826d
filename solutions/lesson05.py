"""Solutions to lesson 05's exercises, and one wrong answer each (tests/test_exercises.py)."""

import torch


def accumulate(model, micro_batches):
    k = len(micro_batches)
    total = 0.0
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y)
        (loss / k).backward()  # frees this micro-batch's graph now
        total += loss.item() / k  # a number: no graph kept for logging
    return total


def accumulate_summed(model, micro_batches):
    """Right gradient, but every graph stays alive until the single backward."""
    k = len(micro_batches)
    total = 0
    for mb in micro_batches:
        total = total + torch.nn.functional.mse_loss(model(mb.x), mb.y) / k
    total.backward()
    return total.item()


# 05.2: (5_000_000 - 3_000_000) / 40_000 = 50 samples fit; the largest divisor of 192 up to 50 is 48
SOLUTIONS = {"05.1": 8_000_000, "05.2": (48, 4), "05.3": accumulate}
WRONG = {"05.1": 4_000_000, "05.2": (50, 4), "05.3": accumulate_summed}
