"""Run a learner's training function on a copy of the model and record what it did (lesson 08).

Nothing here reads the learner's source: the optimizer, scheduler and scaler handed to the function
are instrumented, and a forward pre-hook notes which micro-batch each forward pass consumed.
"""

from __future__ import annotations

import copy
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from ..data import Data
from ..engine import grads_of, params_of


class RunawayLoop(RuntimeError):
    """Raised from inside the model when a loop forwards far more often than the data allows."""


@dataclass
class StepRecord:
    """What the optimizer saw at one `optimizer.step()`: captured by a step pre-hook, so under a
    GradScaler these are the gradients after unscaling, exactly what the update uses."""

    index: int
    window: tuple  # micro-batch indices forwarded since the previous step (None: unknown input)
    position: int  # forwards done so far
    grads: dict[str, torch.Tensor]
    params: dict[str, torch.Tensor]  # before the update: the parameters the window was run at
    lr: float
    scale: float | None  # GradScaler's scale at that moment
    norm_updates: (
        int  # BatchNorm running-statistic updates so far (num_batches_tracked), 0 without BN
    )


@dataclass
class Recording:
    steps: list[StepRecord] = field(default_factory=list)
    forwards: list = field(default_factory=list)  # micro-batch index of every forward with grad on
    zero_grads: list[int] = field(default_factory=list)  # forwards done at each zero_grad call
    scheduler_steps: list[int] = field(default_factory=list)
    scaler_calls: list[tuple[str, int]] = field(default_factory=list)  # (method, forwards done)
    error: BaseException | None = None
    error_where: str = ""  # "scaler.unscale_" when the exception came out of an instrumented call
    error_line: str = ""  # the learner's line that raised, when it can be found
    warnings: list[str] = field(default_factory=list)
    model: nn.Module | None = None
    seconds: float = 0.0


def _identify(x, batches: list[Data], by_id: dict[int, int]):
    """Index of the micro-batch whose inputs are `x`; None when `x` is not one of them."""
    if not isinstance(x, torch.Tensor):
        return None
    if id(x) in by_id:
        return by_id[id(x)]
    for i, mb in enumerate(batches):  # the loop may have moved or cast the tensor: compare values
        if mb.x.shape == x.shape and torch.equal(mb.x.to(x.dtype), x.detach().cpu()):
            return i
    return None


def _wrap(obj, name: str, before: Callable) -> None:
    """Replace `obj.name` on this instance only, so the original class stays untouched."""
    original = getattr(obj, name)

    def wrapper(*args, **kwargs):
        before()
        return original(*args, **kwargs)

    setattr(obj, name, wrapper)


def record(
    fn: Callable,
    model: nn.Module,
    batches: list[Data],
    k: int,
    *,
    optimizer_factory: Callable,
    scheduler_factory: Callable | None = None,
    scaler_factory: Callable | None = None,
    max_norm: float | None = None,
    max_forwards: int | None = None,
) -> Recording:
    """Call `fn(model_copy, optimizer, [(x, y), ...], k, **extras)` once and record what happened.

    `extras` holds only what the audit was asked to check: scaler, scheduler, max_norm. An exception
    from `fn` is recorded, never propagated: the audit reports it.
    """
    rec = Recording()
    model = copy.deepcopy(model)
    rec.model = model
    optimizer = optimizer_factory(model.parameters())
    scheduler = scheduler_factory(optimizer) if scheduler_factory else None
    scaler = scaler_factory() if scaler_factory else None
    by_id = {id(mb.x): i for i, mb in enumerate(batches)}
    limit = max_forwards or 4 * len(batches) + 16

    def on_forward(_module, args):
        if not torch.is_grad_enabled():  # a no_grad forward (logging, evaluation) adds no gradient
            return
        rec.forwards.append(_identify(args[0] if args else None, batches, by_id))
        if len(rec.forwards) > limit:
            raise RunawayLoop(f"more than {limit} forward passes for {len(batches)} micro-batches")

    def on_step(opt, _args, _kwargs):
        start = rec.steps[-1].position if rec.steps else 0
        rec.steps.append(
            StepRecord(
                index=len(rec.steps),
                window=tuple(rec.forwards[start:]),
                position=len(rec.forwards),
                grads=grads_of(model),
                params=params_of(model),
                lr=float(opt.param_groups[0]["lr"]),
                scale=float(scaler.get_scale()) if scaler is not None else None,
                norm_updates=_norm_updates(model),
            )
        )

    model.register_forward_pre_hook(on_forward)
    optimizer.register_step_pre_hook(on_step)
    note_zero = lambda: rec.zero_grads.append(len(rec.forwards))  # noqa: E731
    _wrap(optimizer, "zero_grad", before=note_zero)
    _wrap(model, "zero_grad", before=note_zero)
    if scheduler is not None:
        _wrap(scheduler, "step", before=lambda: rec.scheduler_steps.append(len(rec.forwards)))
    if scaler is not None:
        for method in ("scale", "unscale_", "step", "update"):
            _note_scaler(scaler, method, rec)

    extras = {"scaler": scaler, "scheduler": scheduler, "max_norm": max_norm}
    extras = {name: value for name, value in extras.items() if value is not None}
    pairs = [(mb.x, mb.y) for mb in batches]
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn(model, optimizer, pairs, k, **extras)
        except Exception as err:  # the learner's code failed: the report says where and why
            rec.error = err
            rec.error_line = _learner_line(err, fn)
    rec.seconds = time.perf_counter() - started
    rec.warnings = [str(w.message) for w in caught]
    return rec


def _norm_updates(model: nn.Module) -> int:
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.num_batches_tracked is not None:
            return int(m.num_batches_tracked)
    return 0


def _note_scaler(scaler, method: str, rec: Recording) -> None:
    original = getattr(scaler, method)

    def wrapper(*args, **kwargs):
        rec.scaler_calls.append((method, len(rec.forwards)))
        try:
            return original(*args, **kwargs)
        except Exception:
            rec.error_where = rec.error_where or f"scaler.{method}"
            raise

    setattr(scaler, method, wrapper)


def _learner_line(err: BaseException, fn: Callable) -> str:
    """The last line of the learner's own function in the traceback: where to look."""
    code = getattr(fn, "__code__", None)
    frames = traceback.extract_tb(err.__traceback__)
    for frame in reversed(frames):
        if code is not None and frame.filename == code.co_filename:
            return f"line {frame.lineno}: {(frame.line or '').split('  #')[0]}"
    return ""
