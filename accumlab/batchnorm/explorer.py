"""Lesson 04's explorer: micro-batch size, accumulation steps, norm layer, momentum and optimizer
steps → statistics per micro-batch, gradient error vs the full batch, running-mean trajectory."""

from __future__ import annotations

import ipywidgets as W

from .. import _validate
from .._threads import one_thread
from .._validate import one_of, positive_int
from ..data import Data
from ..explorer import Explorer, int_slider
from ..models import NORMS
from .layers import batchnorm_data, norm_model
from .plots import plot_batchnorm_explorer, update_batchnorm_explorer
from .running import check_momentum, running_mean_trajectory, with_momentum
from .stats import batch_gradient_diff, micro_batch_stats

MAX_STEPS_SHOWN = 30  # optimizer steps the running-mean panel can show


@one_thread()
def explore_batchnorm(
    norm: str,
    micro_batch_size: int,
    accumulation_steps: int,
    momentum: float,
    *,
    steps: int = 4,
    data: Data | None = None,
) -> dict:
    """Everything lesson 04's widget draws for one setting: per-micro-batch statistics, the gradient
    error of accumulating vs the full batch, and (BatchNorm only) the running-mean trajectory over
    `steps` optimizer steps."""
    one_of("norm", norm, NORMS)
    check_momentum("momentum", momentum)
    positive_int("steps", steps, maximum=MAX_STEPS_SHOWN)
    data = _validate.data("data", data) if data is not None else batchnorm_data()
    window = len(data.first_window(micro_batch_size, accumulation_steps))
    model = with_momentum(norm_model(norm), momentum) if norm == "batch" else norm_model(norm)
    batch = data[:window]
    return {
        "norm": norm,
        "momentum": momentum,
        "stats": micro_batch_stats(model, batch, micro_batch_size),
        "diff": batch_gradient_diff(model, batch, micro_batch_size),
        "trajectory": (
            running_mean_trajectory(model, data, micro_batch_size, accumulation_steps, steps=steps)
            if norm == "batch"
            else None
        ),
    }


def batchnorm_explorer(data=None) -> Explorer:
    """Build the lesson 04 explorer. Slider ranges make invalid settings unreachable: micro-batches
    hold at least 2 samples (BatchNorm needs a variance) and micro-batch × k never exceeds the data."""
    data = _validate.data("data", data) if data is not None else batchnorm_data()
    n = len(data)
    if n < 4:
        raise ValueError(f"data must hold at least 4 samples for this explorer, got {n}")
    mb = int_slider("micro-batch size", 4, 2, n // 2)
    k = int_slider("accumulation steps k", 4, 1, n // 4)
    norm = W.Dropdown(options=list(NORMS), value="batch", description="norm")
    # PyTorch's momentum is the weight of the NEW batch; 0 and 1 are excluded (no update / no memory)
    momentum = W.FloatSlider(
        value=0.1,
        min=0.01,
        max=0.9,
        step=0.01,
        description="momentum",
        continuous_update=False,
        style={"description_width": "initial"},
    )

    def clamp_k(change):
        k.max = max(1, n // change["new"])  # keeps micro_batch_size × k ≤ n
        # the cap named on the slider: a k past it stays at the cap, and the learner sees why
        k.description = f"accumulation steps k (≤ {k.max}: micro-batch × k ≤ {n})"

    clamp_k({"new": mb.value})

    # when one window holds all the data, the full-batch line moves 1 − (1 − m)^steps of the way
    # to the data's mean: at m = 0.1 that is 34 % after 4 steps, 96 % after 30 (with more windows
    # it zigzags between the window means)
    steps = int_slider("optimizer steps", 4, 1, MAX_STEPS_SHOWN)
    mb.observe(clamp_k, names="value")

    def compute(
        micro_batch_size: int, accumulation_steps: int, norm: str, momentum: float, steps: int
    ):
        return explore_batchnorm(
            norm, micro_batch_size, accumulation_steps, momentum, steps=steps, data=data
        )

    controls = {
        "micro_batch_size": mb,
        "accumulation_steps": k,
        "norm": norm,
        "momentum": momentum,
        "steps": steps,
    }
    return Explorer(controls, compute, plot_batchnorm_explorer, update_batchnorm_explorer)
