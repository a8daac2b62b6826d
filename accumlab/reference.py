"""Reference gradients: the full batch in one backward, and one accumulated window (lesson 02)."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from . import _validate
from .data import Data
from .engine import Recipe, forward, grads_of, run
from .losses import Loss, get_loss


def full_batch_grads(model: nn.Module, data: Data, *, loss: str | Loss = "mse"):
    """Gradient of the mean loss over every item of `data`, one forward and one backward.

    Works on a copy: the caller's model and its .grad stay untouched. Introduced in lesson 02.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    loss_fn = get_loss(loss)
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    loss_sum, count = loss_fn(forward(model, data, "the whole data"), data.y)
    if count == 0:
        raise ValueError("data holds zero real items (all labels are padding)")
    (loss_sum / count).backward()
    return grads_of(model)


def accumulated_grads(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int | None = None,
    *,
    normalization: str = "mean",
    last_window: str = "divide_by_actual",
    zero_grad: str = "window",
    loss: str | Loss = "mse",
):
    """Gradient the optimizer sees after accumulating `data` as ONE window. Lesson 02.

    `accumulation_steps` defaults to the number of micro-batches `data` splits into; a larger value
    makes a short window (lesson 03). A smaller one would need a second optimizer step: an error.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    micro_batch_size = _validate.positive_int("micro_batch_size", micro_batch_size)
    needed = math.ceil(len(data) / micro_batch_size)
    if accumulation_steps is None:
        accumulation_steps = needed
    recipe = Recipe(micro_batch_size, accumulation_steps, normalization, last_window, zero_grad)
    if accumulation_steps < needed:
        raise ValueError(
            f"accumulation_steps={accumulation_steps} covers {recipe.window_size} samples but data "
            f"holds {len(data)}: accumulated_grads describes one optimizer step; use al.run for more"
        )
    # last_window="drop" dropping the only window is an error in run: no step, no gradient
    trace = run(recipe, model, data, loss=loss, optimizer=None, record_grads=False)
    return trace.window_grads[0]


def accumulation_progress(
    model: nn.Module, data: Data, micro_batch_size: int, accumulation_steps: int, *, loss="mse"
):
    """Each parameter's accumulated gradient after 1, 2, ... k micro-batches, and the full-batch
    gradient over the same samples. Drives lesson 02's widget.

    Returns {"names", "accumulated": tensor (k, n_values), "full": tensor (n_values,), "samples"}.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    recipe = Recipe(micro_batch_size, accumulation_steps)
    window = data.first_window(micro_batch_size, accumulation_steps)
    trace = run(recipe, model, window, loss=loss, optimizer=None, record_grads=True)
    names = [n for n, _ in model.named_parameters()]
    flat = [torch.cat([g[n].reshape(-1) for n in names]) for g in trace.grads]
    full = full_batch_grads(model, window, loss=loss)
    return {
        "names": _value_names(model),
        "accumulated": torch.stack(flat),
        "full": torch.cat([full[n].reshape(-1) for n in names]),
        "samples": recipe.window_size,
    }


def _value_names(model: nn.Module) -> list[str]:
    out = []
    for n, p in model.named_parameters():
        out += [n] if p.numel() == 1 else [f"{n}[{i}]" for i in range(p.numel())]
    return out
