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


def _compute_ignoring_controls():
    """The sliders left at 4 × 4; compute swapped for one that always runs 8 × 3."""
    explorer = _explorer({"zero_grad": "every_micro_step"})
    real = explorer.compute
    explorer.compute = lambda **v: real(**{**v, "micro_batch_size": 8, "accumulation_steps": 3})
    explorer.refresh()
    return explorer


def _hand_built_explorer():
    """An Explorer with the four controls set right and a compute that makes its data up."""
    import ipywidgets as W
    from matplotlib.figure import Figure

    controls = {
        "micro_batch_size": W.IntSlider(value=8, min=1, max=32),
        "accumulation_steps": W.IntSlider(value=3, min=1, max=8),
        "zero_grad": W.Dropdown(options=["window", "every_micro_step"], value="every_micro_step"),
        "divide_by_k": W.Checkbox(value=True),
    }
    made_up = {"samples": 24, "accumulated": torch.zeros(3, 13, dtype=torch.float64)}
    return al.Explorer(controls, lambda **v: made_up, lambda data: Figure())


def _explorer_on_another_model():
    """Set right, but built on a wider MLP than the lesson's."""
    model = al.mlp(features=2, hidden=5, depth=1, seed=0)
    explorer = al.accumulation.accumulation_explorer(model, al.regression_data(n=32, features=2))
    for name, value in (("micro_batch_size", 8), ("accumulation_steps", 3)):
        explorer.controls[name].value = value
    explorer.controls["zero_grad"].value = "every_micro_step"
    return explorer


def _explorer_on_nudged_model():
    """Set right, on the lesson's model after its parameters moved by 0.05."""
    model = al.mlp(features=2, hidden=3, depth=1, seed=0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05)
    explorer = al.accumulation.accumulation_explorer(model, al.regression_data(n=32, features=2))
    explorer.controls["micro_batch_size"].value = 8
    explorer.controls["accumulation_steps"].value = 3
    explorer.controls["zero_grad"].value = "every_micro_step"
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
            "k set before the micro-batch size (its maximum then follows)",
            _explorer(
                {
                    "accumulation_steps": 3,
                    "micro_batch_size": 8,
                    "zero_grad": "every_micro_step",
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
        ("compute swapped to ignore the sliders, left at 4 × 4", _compute_ignoring_controls()),
        ("a hand-built Explorer whose compute makes its data up", _hand_built_explorer()),
        ("set right, on a wider MLP", _explorer_on_another_model()),
        ("set right, on the lesson's model nudged by 0.05", _explorer_on_nudged_model()),
    ],
}

HINTS = {
    "set right, on a wider MLP": "another model or other data",
    "set right, on the lesson's model nudged by 0.05": "another model or other data",
    "explorer.data written by hand, the controls not set": "let it compute",
    "compute swapped to ignore the sliders, left at 4 × 4": "let it compute",
}

STUBS = {
    "00.1": [("the cell's None", None)],
    "00.2": [("the cell's None", None)],
}
