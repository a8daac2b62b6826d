"""Lesson 10: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import math

import numpy as np
import torch

import accumlab as al


def _position_by_walking(step, batches_per_epoch, k):
    # another algorithm: walk the windows one by one
    position, steps = 0, 0
    while steps < step:
        in_epoch = position % batches_per_epoch
        position += min(k, batches_per_epoch - in_epoch)
        steps += 1
    return position


def _position_numpy(step, batches_per_epoch, k):
    per_epoch = -(-batches_per_epoch // k)
    epochs, in_epoch = divmod(step, per_epoch)
    return np.int64(epochs * batches_per_epoch + in_epoch * k)


def _position_library(step, batches_per_epoch, k):
    return al.bookkeeping.position_from_step(step, batches_per_epoch, k)


def _position_schedule(step, batches_per_epoch, k):
    setup = al.bookkeeping.Setup(
        batches_per_epoch=batches_per_epoch, accumulation_steps=k, epochs=4
    )
    return setup.schedule().position_after(step)


def _position_without_k(step, batches_per_epoch, k):
    per_epoch = math.ceil(batches_per_epoch / k)
    epochs, in_epoch = divmod(step, per_epoch)
    return epochs * batches_per_epoch + in_epoch  # the Trainer before PR #8624


RIGHT = {
    "10.1": [
        ("a numpy integer", np.int64(96)),
        ("a 0-d tensor", torch.tensor(96)),
        ("a float", 96.0),
    ],
    "10.2": [
        ("numpy and int", (np.int64(10), 2)),
        ("a list", [10, 2]),
        ("a 1-d tensor", torch.tensor([10, 2])),
    ],
    "10.3": [
        ("walking the windows", _position_by_walking),
        ("returning numpy integers", _position_numpy),
    ],
}

WRONG = {
    "10.1": [
        ("micro-batches, not steps", 750),
        ("the lesson's run", 78),
        ("rounded up once for the whole run", 94),
    ],
    "10.2": [
        ("the lesson's run", (7, 3)),
        ("nothing carried over", (8, 2)),
        ("the last leftovers stepped", (10, 0)),
        ("every epoch's leftovers lost", (10, 6)),
    ],
    "10.3": [
        ("accumlab's position_from_step", _position_library),
        ("accumlab's Schedule", _position_schedule),
        ("forgetting the × k", _position_without_k),
    ],
}


def _resume_position_stub(step, batches_per_epoch, k): ...


STUBS = {
    "10.1": [("the cell as handed out", None)],
    "10.2": [("the cell as handed out", None)],
    "10.3": [("an empty body", _resume_position_stub)],
}
