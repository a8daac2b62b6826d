"""Lessons 00 and 02: the explorer of accumulated vs full-batch gradients."""

from __future__ import annotations

from ..explorer import Explorer, int_slider


def accumulation_explorer(model=None, data=None, *, loss: str = "mse") -> Explorer:
    """Lesson 02: micro-batch size and accumulation steps → accumulated vs full-batch gradient.

    Slider ranges keep micro_batch_size × k within the data, so no invalid value is reachable.
    """
    from ..data import regression_data
    from ..models import mlp
    from ..reference import accumulation_progress
    from .plots import plot_accumulation_progress

    data = data if data is not None else regression_data(n=32, features=2, seed=0)
    model = model if model is not None else mlp(features=2, hidden=3, depth=1, seed=0)
    n = len(data)
    mb = int_slider("micro-batch size", 4, 1, n)
    k = int_slider("accumulation steps k", 4, 1, n // 4)

    def clamp_k(change):
        k.max = max(1, n // change["new"])  # keeps micro_batch_size × k ≤ n

    mb.observe(clamp_k, names="value")

    def compute(micro_batch_size: int, accumulation_steps: int):
        return accumulation_progress(model, data, micro_batch_size, accumulation_steps, loss=loss)

    explorer = Explorer(
        {"micro_batch_size": mb, "accumulation_steps": k}, compute, plot_accumulation_progress
    )
    return explorer
