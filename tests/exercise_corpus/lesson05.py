"""Lesson 05: right, wrong and unanswered answers for its exercises (see __init__.py)."""

from decimal import Decimal

import numpy as np
import torch

import accumlab as al


# --- 05.3: other right loops -------------------------------------------------------------------
def accumulate_sum_reduction(model, micro_batches):
    """reduction="sum" divided by the global number of samples: the same gradient."""
    n = sum(len(mb.x) for mb in micro_batches)
    total = 0.0
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y, reduction="sum") / n
        loss.backward()
        total += loss.item()
    return total


def accumulate_detached_total(model, micro_batches):
    """A detached running total: no graph behind it; returned as a 0-d tensor."""
    k = len(micro_batches)
    total = torch.zeros((), dtype=torch.float64)
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y) / k
        loss.backward()
        total += loss.detach()
    return total


# --- 05.3: wrong loops -------------------------------------------------------------------------
def one_full_batch(model, micro_batches):
    """Skips the technique: one forward over everything."""
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss.item()


def keeps_the_loss_tensor(model, micro_batches):
    """Right gradient, but `total += loss` keeps every micro-batch's graph behind the total."""
    k = len(micro_batches)
    total = 0.0
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y) / k
        loss.backward(retain_graph=True)
        total = total + loss
    return total


def no_division(model, micro_batches):
    total = 0.0
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y)
        loss.backward()  # k times too large a gradient
        total += loss.item() / len(micro_batches)
    return total


def calls_the_package(model, micro_batches):
    """accumlab's own loop does the work."""
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    return float(al.memory.train_step(model, opt, micro_batches)) / 32


RIGHT = {
    "05.1": [
        ("a float", 1.2e7),
        ("a numpy integer", np.int64(12_000_000)),
        ("a 0-d tensor", torch.tensor(12_000_000)),
        ("a Decimal", Decimal("12000000")),
    ],
    "05.2": [
        ("a list", [64, 3]),
        ("numpy integers", (np.int64(64), np.int64(3))),
        ("a 1-d tensor", torch.tensor([64, 3])),
        ("whole floats", (64.0, 3.0)),
    ],
    "05.3": [
        ("reduction='sum' over the global count", accumulate_sum_reduction),
        ("a detached 0-d tensor total", accumulate_detached_total),
    ],
}
WRONG = {
    "05.1": [
        ("one buffer", 6_000_000),
        ("the number of parameters", 3_000_000),
        ("parameters, gradients and state", 24_000_000.0),
        ("a bool", True),
    ],
    "05.2": [
        ("the floor plus the samples (one moment only)", (48, 4)),
        ("too large", (96, 2)),
        ("fits but smaller than it could be", (32, 6)),
        ("not a divisor", (65, 3)),
        ("the whole batch", (192, 1)),
    ],
    "05.3": [
        ("one full-batch forward", one_full_batch),
        ("the running total keeps its graphs", keeps_the_loss_tensor),
        ("no / k", no_division),
        ("calls al.memory.train_step", calls_the_package),
    ],
}
STUBS = {
    "05.1": [("None", None)],
    "05.2": [("(None, None)", (None, None))],
}
