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


# 05.1: exp_avg, exp_avg_sq and max_exp_avg_sq are zeros_like(param): 3 buffers × 2 bytes × 3,000,000.
# 05.2: during a forward 2,400,000 + m × 40,000 <= 5,000,000 gives m <= 65; the largest divisor of
# 192 up to 65 is 64, so k = 3 (during optimizer.step() the 3,000,000-byte floor fits on its own)
SOLUTIONS = {"05.1": 18_000_000, "05.2": (64, 3), "05.3": accumulate}
WRONG = {"05.1": 12_000_000, "05.2": (48, 4), "05.3": accumulate_summed}
