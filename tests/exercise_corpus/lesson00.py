"""Lesson 00: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import numpy as np
import torch

import accumlab as al


def _explorer(values: dict | None = None):
    """Lesson 00's explorer with its controls set, in the order given, as a learner would."""
    explorer = al.accumulation.accumulation_explorer()
    for name, value in (values or {}).items():
        explorer.controls[name].value = value
    return explorer


def _data_written_by_hand():
    explorer = _explorer()  # 16 samples in 4 micro-batches
    data = dict(explorer.data)
    data["samples"], data["accumulated"] = 24, data["accumulated"][:3]
    explorer.data = data  # the controls still say 4 × 4
    return explorer


RIGHT = {
    "00.1": [
        ("a float", 48.0),
        ("a numpy integer", np.int64(48)),
        ("a 0-d integer tensor", torch.tensor(48)),
        ("a 0-d float tensor", torch.tensor(48.0)),
    ],
    "00.2": [
        (
            "controls set in another order, loss not divided",
            _explorer(
                {
                    "zero_grad": "every_micro_step",
                    "divide_by_k": False,
                    "accumulation_steps": 3,
                    "micro_batch_size": 8,
                }
            ),
        ),
        (
            "numpy integers for the sliders",
            _explorer(
                {
                    "micro_batch_size": np.int64(8),
                    "accumulation_steps": np.int64(3),
                    "zero_grad": "every_micro_step",
                }
            ),
        ),
    ],
}

WRONG = {
    "00.1": [
        ("one GPU's window, as a numpy integer: skips the GPUs", np.int64(24)),
        ("micro-batch × GPUs, without k", 12.0),
        ("not a whole number", 48.5),
        ("the number as text", "48"),
    ],
    "00.2": [
        ("the pair typed, the explorer never set: skips the technique", (8, 3)),
        ("a fresh explorer at its defaults", _explorer()),
        (
            "24 samples in 3 micro-batches, zeroing once per window",
            _explorer({"micro_batch_size": 8, "accumulation_steps": 3}),
        ),
        (
            "micro-batch 3 and k = 8",
            _explorer(
                {"micro_batch_size": 3, "accumulation_steps": 8, "zero_grad": "every_micro_step"}
            ),
        ),
        ("explorer.data written by hand, the controls not set", _data_written_by_hand()),
    ],
}

STUBS = {
    "00.1": [("the cell's None", None)],
    "00.2": [("the cell's None", None)],
}
