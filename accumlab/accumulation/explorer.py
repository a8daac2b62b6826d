"""Lessons 00 and 02: the explorer of accumulated vs full-batch gradients."""

from __future__ import annotations

from ..explorer import Explorer, int_slider


def accumulation_explorer(model=None, data=None, *, loss: str = "mse") -> Explorer:
    """Lesson 02: micro-batch size, accumulation steps, where `zero_grad()` sits and whether the
    loss is divided by k → `.grad` after each micro-batch against the full-batch gradient.

    Slider ranges keep micro_batch_size × k within the data, so no invalid value is reachable.
    """
    import ipywidgets as W

    from .plots import plot_window_progress, update_window_progress
    from .progress import explorer_inputs, window_progress

    explorer_inputs(model, data, loss)
    default_model, default_data = _default_problem()
    data = data if data is not None else default_data
    model = model if model is not None else default_model
    n = len(data)
    mb = int_slider("micro-batch size", 4, 1, n)
    k = int_slider("accumulation steps k", 4, 1, n // 4)
    zero = W.ToggleButtons(
        options=[
            ("zero_grad once per window", "window"),
            ("at the top of every iteration", "every_micro_step"),
        ],
        value="window",
        style={"button_width": "auto"},
    )
    divide = W.Checkbox(value=True, description="loss / k", indent=False)

    def clamp_k(change):
        k.max = max(1, n // change["new"])  # keeps micro_batch_size × k ≤ n

    mb.observe(clamp_k, names="value")

    def compute(micro_batch_size: int, accumulation_steps: int, zero_grad: str, divide_by_k: bool):
        return window_progress(
            model,
            data,
            micro_batch_size,
            accumulation_steps,
            zero_grad=zero_grad,
            divide_by_k=divide_by_k,
            loss=loss,
        )

    controls = {
        "micro_batch_size": mb,
        "accumulation_steps": k,
        "zero_grad": zero,
        "divide_by_k": divide,
    }
    return Explorer(controls, compute, plot_window_progress, update_window_progress)


def _default_problem():
    """The model and data `accumulation_explorer()` draws without arguments (a fresh copy each
    call): lesson 00 builds them by hand, and its exercise 00.2 recomputes with them."""
    from ..data import regression_data
    from ..models import mlp

    return mlp(features=2, hidden=3, depth=1, seed=0), regression_data(n=32, features=2, seed=0)
