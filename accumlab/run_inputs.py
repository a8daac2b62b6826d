"""What `al.run` accepts: its arguments checked before any work, and the forward pass that says
in the lesson's words why a model cannot take a micro-batch (lesson 02+)."""

from __future__ import annotations

import torch
from torch import nn

from . import _validate
from ._validate import (
    MAX_STEPS,
    fits_in_memory,
    flag,
    function,
    one_of,
    positive_float,
    positive_int,
)
from .data import Data
from .losses import Loss, get_loss
from .optim import OPTIMIZERS


def check_run(
    recipe, model, data, loss, optimizer, lr, epochs, scheduler, flags: dict
) -> tuple[list[list[Data]], Loss]:
    """`run`'s arguments, checked before any work (the first micro-batch's forward then checks
    the shapes against the loss). Returns the windows and the loss."""
    from .engine import Recipe  # engine imports this module

    _validate.instance("recipe", recipe, Recipe, "an accumlab Recipe(micro_batch_size, ...)")
    _validate.model("model", model)
    _validate.data("data", data)
    loss_fn = get_loss(loss)
    if optimizer is not None and not callable(optimizer):
        one_of("optimizer", optimizer, OPTIMIZERS)
    positive_float("lr", lr, allow_zero=True)
    if scheduler is not None:
        function("scheduler", scheduler)
    for name, value in flags.items():
        flag(name, value)
    positive_int("epochs", epochs)
    windows = recipe.windows(data)  # validates micro_batch_size against len(data)
    per_epoch = sum(len(w) for w in windows)
    if epochs * per_epoch > MAX_STEPS:
        raise ValueError(
            f"epochs={epochs} × {per_epoch} micro-batches per epoch = {epochs * per_epoch:,} "
            f"micro-steps; accumlab runs at most {MAX_STEPS:,} in one call (about a millisecond "
            "each for a lesson model on a laptop CPU: more is a typo, not a lesson)"
        )
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if flags.get("record_windows"):
        steps = epochs * len(windows)
        fits_in_memory(
            f"record_windows=True over {steps:,} optimizer steps", 2 * steps * param_bytes
        )
    if flags.get("record_grads"):
        fits_in_memory(
            f"record_grads=True over {epochs * per_epoch:,} micro-steps",
            epochs * per_epoch * param_bytes,
        )
    return windows, loss_fn


def check_scheduler(sched):
    """What the `scheduler` callable returned must be an LR scheduler."""
    if not callable(getattr(sched, "step", None)):
        raise ValueError(
            "scheduler must return an LR scheduler (an object with .step()) for the optimizer it "
            f"is given, got {type(sched).__name__} {sched!r:.60}"
        )
    return sched


# PyTorch's words when a BatchNorm layer in training mode sees one value per channel
_ONE_VALUE = "Expected more than 1 value per channel when training"
_OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def forward(model: nn.Module, mb: Data | torch.Tensor, where: str) -> torch.Tensor:
    """`model(mb.x)` (or `model(mb)` for a tensor), with PyTorch's errors about shapes, dtypes and
    devices, and its single-value BatchNorm error, said in the lesson's terms.

    PyTorch itself decides: BatchNorm1d on (1, C) fails, BatchNorm2d on (1, C, H, W) with H·W > 1
    does not, so no rule about micro-batch sizes is written down here."""
    x = mb if isinstance(mb, torch.Tensor) else mb.x
    try:
        return model(x)
    except (RuntimeError, IndexError) as err:
        if isinstance(err, _OUT_OF_MEMORY):
            raise  # not a mistake in the input: the machine ran out
        # shapes, dtypes or devices that do not fit: say which ones, keep PyTorch's words too
        p = next(model.parameters(), None)
        params = f"; the model's parameters are {p.dtype} on {p.device}" if p is not None else ""
        fix = ""
        if p is not None and x.is_floating_point() and x.dtype != p.dtype:
            fix = f" Convert one of them: data.to({p.dtype}) or model.to({x.dtype})."
        raise ValueError(
            f"the model cannot take {where}: x has shape {tuple(x.shape)} and dtype {x.dtype} "
            f"on {x.device}{params}. PyTorch said: {str(err).splitlines()[0]}.{fix}"
        ) from err
    except ValueError as err:
        if _ONE_VALUE not in str(err):
            raise
        raise ValueError(
            f"{where} holds {len(x)} sample(s), but BatchNorm in training mode needs at least 2 "
            "values per channel to compute a variance; use micro_batch_size >= 2 (and a data size "
            "that leaves no single-sample micro-batch), put BatchNorm in eval mode, or use "
            "GroupNorm / LayerNorm"
        ) from None
