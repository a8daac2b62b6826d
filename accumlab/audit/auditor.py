"""`al.audit(train_fn, ...)`: run a learner's own accumulation loop against the reference (lesson 08)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import torch
from torch import nn

from .._threads import one_thread
from .._validate import flag, positive_int
from ..data import Data
from ..losses import Loss, get_loss
from ..optim import make_optimizer
from .arguments import check_options
from .data_checks import autocast_findings, finite_findings, modified_findings
from .errors import error_findings
from .explain import gradient_findings
from .findings import AuditReport, Finding
from .gradients import gradient_matches
from .lr_schedule import scheduler_findings
from .memory import memory_findings
from .messages import message
from .norm_layers import batchnorm_findings
from .provenance import foreign_gradient
from .runner import record
from .scaler_step import scaler_step_findings
from .schedule import compared_setup, schedule_findings
from .spec import Setup, default_rtol, lr_factor
from .unexplained import EPSILON_ONLY

# Clipping computed without clip_grad_norm_'s epsilon hides the loss's scale; the loop is then run
# again with max_norm this many times the largest gradient norm seen, where clipping cannot bite.
UNBITTEN = 1e3


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
    last_window: str = "divide_by_actual",
    rtol: float | None = None,
    time_limit: float = 10.0,
    epochs: int = 2,
) -> AuditReport:
    """Audit a learner's gradient accumulation over `epochs` epochs. Introduced in lesson 08.

    `train_fn(model, optimizer, batches, k, **extras)` trains one epoch: `batches` is a list of
    `(x, y)` micro-batches of `data` (copies: the loop may do what it likes with them), `k` the
    accumulation steps. `extras` holds what the audit is asked to check and nothing else:
    `max_norm` (clip once per window), `scheduler` (a LambdaLR to step once per optimizer step),
    `scaler` (a `torch.amp.GradScaler(init_scale=2**10, growth_interval=1)`: its scale changes at
    every clean update(), so an update() inside a window shows). The audit sees the forwards that
    call the model itself, `model(x)`: gradient through `model.forward(x)` or a submodule is
    reported, not attributed. The function is called once per epoch, on one copy of
    `model` with plain SGD (the same optimizer, scheduler and scaler every epoch); the caller's
    model and data are untouched. A loop that keeps state between epochs is a class: the audit
    makes one instance (`train_fn()`) and calls it once per epoch. The run is stopped after
    `time_limit` seconds or when it calls the model or the optimizer far more often than the data
    allows.

    The reference: micro-batches in order, an optimizer step after every k of them and after each
    epoch's last one, each window's gradient equal to the mean over all its items (what one big
    batch gives), clipped once. `last_window` states the policy for an epoch's short last window,
    as in `al.Recipe`: "divide_by_actual" (the default), "divide_by_k" (what Accelerate and
    Lightning do) or "drop"; or "carry": the window continues into the next epoch. Two epochs (the
    default) show what a loop does with a short last window's gradient. Every step's gradient is
    compared with the reference at the loop's own parameters; `rtol` is the relative L2
    difference still called a match (default: by the model's dtype, 1e-9 for float64). A step
    `scaler.step` skipped for an overflow is a step that is not compared. A loop that clips right
    but not with clip_grad_norm_ (its clip hides the loss's scale) is audited once more with a
    max_norm that cannot bite, and the report is that second run's, with a note.
    """
    if not callable(train_fn):
        raise ValueError(f"train_fn must be a function, got {type(train_fn).__name__}")
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(data, Data):
        raise ValueError(f"data must be an accumlab.Data, got {type(data).__name__}")
    k = positive_int("accumulation_steps", accumulation_steps)
    flag("scheduler", scheduler)  # a string such as "no" would mean yes
    flag("scaler", scaler)
    batches = data.micro_batches(micro_batch_size)  # validates micro_batch_size against len(data)
    options = check_options(
        lr=lr,
        rtol=rtol,
        max_norm=max_norm,
        time_limit=time_limit,
        last_window=last_window,
        epochs=epochs,
        micro_batches=len(batches),
    )
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model must have trainable parameters, got a model with none")
    if any(p.device.type == "meta" for p in model.parameters()):
        raise ValueError(
            "model must hold its parameters' values, got parameters on the meta device "
            "(materialise them first: model.to_empty(device='cpu'), then load or initialise them)"
        )
    setup = Setup(
        model,
        batches,
        k,
        get_loss(loss),
        options["lr"],
        options["max_norm"],
        bool(scheduler),
        bool(scaler),
        options["rtol"] or default_rtol(model),
        options["last_window"],
        options["epochs"],
    )
    started = time.perf_counter()
    with one_thread():
        report = _audit(train_fn, setup, params[0].device.type, options["time_limit"])
        if _clipped_another_way(report):
            report = _unclipped(train_fn, setup, params[0].device.type, options, report)
    report.seconds = time.perf_counter() - started
    return report


def _clipped_another_way(report: AuditReport) -> bool:
    """Every unexplained step differs from the reference only by clip_grad_norm_'s epsilon."""
    return "UNEXPLAINED_GRADIENT" in report.codes and bool(
        report["UNEXPLAINED_GRADIENT"].evidence.get(EPSILON_ONLY)
    )


def _unclipped(train_fn, setup: Setup, device: str, options: dict, clipped: AuditReport):
    """The loop clipped right but not with clip_grad_norm_: its loss's scale is hidden by the
    clip, so audit it once more where clipping cannot bite, and say so in a note."""
    unexplained = clipped["UNEXPLAINED_GRADIENT"].evidence
    max_norm = float(f"{UNBITTEN * max(clipped.norms_before_clipping):.2g}")
    again = _audit(train_fn, replace(setup, max_norm=max_norm), device, options["time_limit"])
    verdict = (
        "found_bugs" if any(f.code != "CLIPPED_ANOTHER_WAY" for f in again.findings) else "clean"
    )
    text = message(
        "CLIPPED_ANOTHER_WAY",
        verdict,
        rel=max(unexplained["relative L2 difference"]),
        max_norm=setup.max_norm,
        unbitten=max_norm,
    )
    evidence = {
        "relative L2 difference under clipping": unexplained["relative L2 difference"],
        "max_norm of the second run": max_norm,
    }
    again.findings = [Finding("CLIPPED_ANOTHER_WAY", text, evidence), *again.findings]
    return again


def _audit(train_fn: Callable, setup: Setup, device: str, time_limit: float) -> AuditReport:
    rec = record(
        train_fn,
        setup.model,
        setup.batches,
        setup.k,
        optimizer_factory=lambda params: make_optimizer("sgd", params, setup.lr),
        scheduler_factory=(lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lr_factor))
        if setup.scheduler
        else None,
        # growth_interval=1: a GradScaler updated inside the window changes its scale at once
        scaler_factory=(lambda: torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=1))
        if setup.scaler
        else None,
        max_norm=setup.max_norm,
        time_limit=time_limit,
        epochs=setup.epochs,
    )
    dtypes = [p.dtype for p in setup.model.parameters() if p.is_floating_point()]
    report = AuditReport(
        name=getattr(train_fn, "__name__", type(train_fn).__name__),
        micro_batches=len(setup.batches),
        accumulation_steps=setup.k,
        expected_steps=tuple(setup.positions),
        seen_steps=tuple(s.position for s in rec.steps),
        zero_grads=tuple(rec.zero_grads),
        scheduler_steps=tuple(rec.scheduler_steps),
        rtol=setup.rtol,
        dtype=str(dtypes[0]).removeprefix("torch.") if dtypes else "float32",
        last_window=setup.last_window,
        epochs=setup.epochs,
        graphs_together=rec.graphs_together,
    )
    broken = error_findings(rec, setup)
    if broken:
        report.findings = broken + modified_findings(rec)
        return report
    compared = compared_setup(rec, setup)  # the loop's windows may run across epochs
    grads = gradient_matches(rec, compared)
    report.checks = grads.checks
    report.norms_before_clipping = [float(m.reference.norm()) for m in grads.matches]
    report.findings = (
        finite_findings(rec, setup)
        + modified_findings(rec)
        + schedule_findings(rec, setup, grads, compared)
        + gradient_findings(grads, rec, compared)
        + scaler_step_findings(rec, setup, grads)
        + scheduler_findings(rec, setup)
        + memory_findings(rec)
        + batchnorm_findings(rec, setup, grads.first)
        + autocast_findings(rec, setup)
    )
    if report.ok:  # a clean comparison: did the loop's own backward passes make those gradients?
        report.foreign_gradient = foreign_gradient(rec, compared)
    return report
