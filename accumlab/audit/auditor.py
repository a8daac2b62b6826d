"""`al.audit(train_fn, ...)`: run a learner's own accumulation loop against the reference (lesson 08)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn

from .._threads import one_thread
from .._validate import positive_float, positive_int
from ..data import Data
from ..losses import Loss, get_loss
from ..optim import make_optimizer
from .errors import error_findings
from .findings import AuditReport
from .gradients import gradient_findings
from .norm_layers import batchnorm_findings
from .runner import record
from .schedule import schedule_findings, scheduler_findings
from .spec import Setup, lr_factor


def audit(
    train_fn: Callable,
    *,
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    loss: str | Loss = "mse",
    lr: float = 0.1,
    max_norm: float | None = None,
    scheduler: bool = False,
    scaler: bool = False,
    rtol: float = 1e-6,
) -> AuditReport:
    """Audit a learner's epoch of gradient accumulation. Introduced in lesson 08.

    `train_fn(model, optimizer, batches, k, **extras)` trains one epoch: `batches` is a list of
    `(x, y)` micro-batches of `data`, `k` the accumulation steps. `extras` holds what the audit is
    asked to check and nothing else: `max_norm` (clip once per window), `scheduler` (a LambdaLR to
    step once per optimizer step), `scaler` (a `torch.amp.GradScaler`). The function runs once on
    a copy of `model` with plain SGD; the caller's model is untouched.

    The reference: micro-batches in order, an optimizer step after every k of them and after the
    last one, each window's gradient equal to the mean over all its items (what one big batch
    gives), clipped once. Every step's gradient is compared with it at the loop's own parameters.
    `rtol` is the relative L2 difference still called a match (float64 models: keep 1e-6).
    """
    if not callable(train_fn):
        raise ValueError(f"train_fn must be a function, got {type(train_fn).__name__}")
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(data, Data):
        raise ValueError(f"data must be an accumlab.Data, got {type(data).__name__}")
    k = positive_int("accumulation_steps", accumulation_steps)
    batches = data.micro_batches(micro_batch_size)  # validates micro_batch_size against len(data)
    positive_float("lr", lr)
    positive_float("rtol", rtol)
    if max_norm is not None:
        positive_float("max_norm", max_norm)
    params = list(model.parameters())
    if not params:
        raise ValueError("model must have parameters to train, got a model with none")
    device = params[0].device.type
    setup = Setup(
        model, batches, k, get_loss(loss), lr, max_norm, bool(scheduler), bool(scaler), rtol
    )

    started = time.perf_counter()
    with one_thread():
        return _audit(train_fn, setup, started, device)


def _audit(train_fn: Callable, setup: Setup, started: float, device: str) -> AuditReport:
    lr, k, batches, max_norm = setup.lr, setup.k, setup.batches, setup.max_norm
    scheduler, scaler = setup.scheduler, setup.scaler
    rec = record(
        train_fn,
        setup.model,
        batches,
        k,
        optimizer_factory=lambda params: make_optimizer("sgd", params, lr),
        scheduler_factory=(lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lr_factor))
        if scheduler
        else None,
        # growth_interval=1: a GradScaler updated inside the window changes its scale at once
        scaler_factory=(lambda: torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=1))
        if scaler
        else None,
        max_norm=max_norm,
    )
    report = AuditReport(
        name=getattr(train_fn, "__name__", type(train_fn).__name__),
        micro_batches=len(batches),
        accumulation_steps=k,
        expected_steps=tuple(setup.positions),
        seen_steps=tuple(s.position for s in rec.steps),
        zero_grads=tuple(rec.zero_grads),
        scheduler_steps=tuple(rec.scheduler_steps),
        rtol=setup.rtol,
    )
    broken = error_findings(rec, setup)
    if broken:
        report.findings = broken
    else:
        grads, checks, first = gradient_findings(rec, setup)
        report.checks = checks
        report.findings = (
            schedule_findings(rec, setup)
            + grads
            + scheduler_findings(rec, setup)
            + batchnorm_findings(rec, setup, first)
        )
    report.seconds = time.perf_counter() - started
    return report
