"""Lessons 00 and 02: `.grad` after each micro-batch of one window, for a correct or a buggy loop,
against the full-batch gradient over the same samples."""

from __future__ import annotations

import torch
from torch import nn

from .. import _validate
from .._validate import flag, one_of
from ..compare import grad_diff
from ..data import Data
from ..engine import ZERO_GRAD_PLACEMENTS, Recipe, run
from ..losses import get_loss
from ..reference import full_batch_grads


def window_progress(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    zero_grad: str = "window",
    divide_by_k: bool = True,
    loss: str = "mse",
) -> dict:
    """Each parameter value's `.grad` after 1, 2, … k micro-batches of the first window of `data`,
    and the full-batch gradient over the same samples. Lesson 02's explorer draws it.

    `zero_grad="every_micro_step"` is the loop with `optimizer.zero_grad()` at the top of every
    iteration; `divide_by_k=False` the loop that forgets `loss / k`.
    Returns {"names", "accumulated" (k, values), "full" (values,), "samples", "zero_grad",
    "divide_by_k", "diff" (the optimizer's gradient vs the full batch, a GradDiff)}.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    one_of("zero_grad", zero_grad, ZERO_GRAD_PLACEMENTS)
    flag("divide_by_k", divide_by_k)
    window = data.first_window(micro_batch_size, accumulation_steps)
    recipe = Recipe(
        micro_batch_size,
        accumulation_steps,
        normalization="mean" if divide_by_k else "none",
        zero_grad=zero_grad,
    )
    trace = run(recipe, model, window, loss=loss, optimizer=None, record_grads=True)
    names = [n for n, _ in model.named_parameters()]
    full = full_batch_grads(model, window, loss=loss)
    return {
        "names": value_names(model),
        "accumulated": torch.stack(
            [torch.cat([g[n].reshape(-1) for n in names]) for g in trace.grads]
        ),
        "full": torch.cat([full[n].reshape(-1) for n in names]),
        "samples": recipe.window_size,
        "zero_grad": zero_grad,
        "divide_by_k": divide_by_k,
        "diff": grad_diff(trace.window_grads[0], full),
    }


def value_names(model: nn.Module) -> list[str]:
    """One name per scalar of the model's parameters: `w`, or `0.weight[3]`."""
    _validate.instance("model", model, nn.Module, "a torch.nn.Module such as al.mlp()")
    out = []
    for n, p in model.named_parameters():
        out += [n] if p.numel() == 1 else [f"{n}[{i}]" for i in range(p.numel())]
    return out


# the explorer's accumulation-steps slider runs from 1 to len(data) // 4
EXPLORER_MIN_SAMPLES = 4


def explorer_inputs(model, data, loss) -> None:
    """What `accumulation_explorer` is given, checked before its sliders are sized from it."""
    if model is not None:
        _validate.model("model", model)
    if data is not None:
        _validate.data("data", data)
        if len(data) < EXPLORER_MIN_SAMPLES:
            raise ValueError(
                f"data must hold at least {EXPLORER_MIN_SAMPLES} samples for this explorer (its "
                f"accumulation-steps slider runs up to len(data) // 4), got {len(data)}"
            )
    get_loss(loss)
