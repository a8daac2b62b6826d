"""Optimizer state under accumulation: Adam's moments and step count advance once per optimizer
step, so k accumulated micro-batches equal one full-batch step, while k small steps do not (lesson 06).
"""

from __future__ import annotations

import torch

from .. import _validate
from .._validate import one_of, positive_int
from ..compare import grad_diff
from ..engine import Recipe, Trace, run


def adam_steps(trace) -> int:
    """Adam's own step counter (the one its bias correction uses) after a run."""
    _validate.instance("trace", trace, Trace, "the Trace al.run returns")
    states = list(trace.optimizer.state.values()) if trace.optimizer is not None else []
    if not states or any("step" not in s for s in states):
        raise ValueError(
            "trace's optimizer keeps no step count (adam_steps reads Adam's): run with "
            "optimizer='adam' or 'adamw'"
        )
    steps = {int(s["step"]) for s in states}
    if len(steps) != 1:
        raise ValueError(f"parameters disagree on Adam's step count: {sorted(steps)}")
    return steps.pop()


def adam_comparison(
    accumulation_steps: int = 4,
    *,
    n: int = 32,
    epochs: int = 3,
    lr: float = 0.01,
    optimizer: str = "adam",
    seed: int = 0,
) -> dict:
    """Three ways through the same data with Adam(W). Lesson 06.

    full: one batch of n per step; accumulated: k micro-batches of n/k, one step per window;
    small_steps: a step after every micro-batch of n/k. Returns each run's final parameters, its
    difference from `full`, Adam's step count and the number of optimizer steps taken.
    """
    from ..data import regression_data
    from ..models import mlp

    k = positive_int("accumulation_steps", accumulation_steps)
    one_of("optimizer", optimizer, ("adam", "adamw"))  # the comparison reads Adam's step count
    for name, value, most in (("n", n, 2**16), ("epochs", epochs, 1000)):
        positive_int(name, value)
        if value > most:  # a demonstration on a tiny MLP: more only makes the lesson wait
            raise ValueError(f"{name} must be at most {most}, got {value}")
    if n % k:
        raise ValueError(f"accumulation_steps must divide n={n}, got {k}")
    data = regression_data(n=n, features=4, seed=seed)
    model = mlp(features=4, hidden=8, depth=1, seed=seed)
    recipes = {
        "full": Recipe(n, 1),
        "accumulated": Recipe(n // k, k),
        "small_steps": Recipe(n // k, 1),
    }
    out = {"k": k, "params": {}, "diffs": {}, "adam_steps": {}, "optimizer_steps": {}}
    for name, recipe in recipes.items():
        trace = run(
            recipe, model, data, optimizer=optimizer, lr=lr, epochs=epochs, record_grads=False
        )
        out["params"][name] = trace.params[-1]
        out["adam_steps"][name] = adam_steps(trace)
        out["optimizer_steps"][name] = trace.count("step")
    for name, params in out["params"].items():
        out["diffs"][name] = grad_diff(
            {p: params[p] - model.state_dict()[p] for p in params},
            {p: out["params"]["full"][p] - model.state_dict()[p] for p in params},
        )
    return out


def max_param_gap(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """Largest |a − b| over every parameter value (inf when either holds a NaN or inf)."""
    return grad_diff(a, b).max_abs
