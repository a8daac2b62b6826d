"""Run a learner's training function on copies of the model and the data and record what it did
(lesson 08).

Nothing here reads the learner's source: the model, optimizer, scheduler and scaler handed to the
function are instrumented (see `instruments.py`), the loop runs under a deadline and a call budget
(`guard.py`), and the copies it got are compared with the originals afterwards.
"""

from __future__ import annotations

import copy
import time
import traceback
import warnings
from collections.abc import Callable

import torch
from torch import nn

from ..data import Data
from .guard import AuditStopped, Budget, deadline
from .instruments import Instruments
from .recording import Recording, limits_for


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
    time_limit: float = 10.0,
    epochs: int = 1,
) -> Recording:
    """Call `fn(model_copy, optimizer, [(x, y), ...], k, **extras)` once per epoch, `epochs`
    times on the same model, optimizer, scheduler and scaler, and record what happened.

    `fn` may be a class: one instance is made for the run (`fn()`) and called once per epoch, so a
    loop can keep state across epochs (a step counter that carries over). `extras` holds only what
    the audit was asked to check: scaler, scheduler, max_norm. Each epoch gets fresh copies of the
    micro-batches, never the caller's tensors. An exception from `fn` is recorded, never
    propagated, and ends the run: the audit reports it. `time_limit` bounds the whole run.
    """
    rec = Recording()
    model = copy.deepcopy(model)
    rec.model = model
    optimizer = optimizer_factory(model.parameters())
    scheduler = scheduler_factory(optimizer) if scheduler_factory else None
    scaler = scaler_factory() if scaler_factory else None
    budget = Budget(limits_for(len(batches) * epochs, sum(len(b) for b in batches) * epochs))
    tools = Instruments(rec, model, optimizer, batches, budget)
    tools.install(scheduler, scaler)

    extras = {"scaler": scaler, "scheduler": scheduler, "max_norm": max_norm}
    extras = {name: value for name, value in extras.items() if value is not None}
    handed: list[list] = []
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with tools.live_saved, deadline(time_limit, _learner_files(fn)):
                loop = fn() if isinstance(fn, type) else fn  # a class: one instance per run
                for epoch in range(epochs):
                    rec.error_epoch = epoch
                    pairs = [(mb.x.clone(), mb.y.clone()) for mb in batches]  # changed in place?
                    handed.append(pairs)
                    tools.begin_epoch(epoch, pairs)
                    loop(model, optimizer, pairs, k, **extras)
        except (Exception, AuditStopped) as err:  # the learner's code failed or was stopped
            rec.error = err
            rec.error_where = tools.error_where
            rec.error_line = _learner_line(err, fn)
    rec.seconds = time.perf_counter() - started
    tools.remove()
    rec.warnings = [str(w.message) for w in caught]
    rec.modified = sorted(
        {
            i
            for pairs in handed
            for i, ((x, y), mb) in enumerate(zip(pairs, batches, strict=True))
            if not (_same(x, mb.x) and _same(y, mb.y))
        }
    )
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    rec.leftover_grad_norm = float(sum(float(g.double().norm()) ** 2 for g in grads) ** 0.5)
    return rec


def _code(fn: Callable):
    """The code object of the learner's loop: a function's, or a class's __call__."""
    target = fn.__call__ if isinstance(fn, type) else fn
    return getattr(target, "__code__", None)


def _learner_files(fn: Callable) -> tuple[str, ...]:
    code = _code(fn)
    return (code.co_filename,) if code is not None else ()


def _same(a, b: torch.Tensor) -> bool:
    """Equal values, NaN equal to NaN: data holding NaN is not 'modified'."""
    return (
        isinstance(a, torch.Tensor)
        and a.shape == b.shape
        and a.dtype == b.dtype
        and torch.allclose(a.detach().cpu(), b, rtol=0, atol=0, equal_nan=True)
    )


def _learner_line(err: BaseException, fn: Callable) -> str:
    """The last line of the learner's own function in the traceback: where to look."""
    code = _code(fn)
    frames = traceback.extract_tb(err.__traceback__)
    for frame in reversed(frames):
        if code is not None and frame.filename == code.co_filename:
            return f"line {frame.lineno}: {(frame.line or '').split('  #')[0]}"
    return ""
