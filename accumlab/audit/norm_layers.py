"""Detector: BatchNorm in training mode, a limit of accumulation rather than a loop bug (lesson 08)."""

from __future__ import annotations

import copy

import torch
from torch import nn

from ..compare import grad_diff
from ..data import Data
from ..reference import full_batch_grads
from .findings import Finding
from .hypotheses import vec
from .messages import message
from .recording import Recording
from .spec import Setup


def batchnorm_findings(rec: Recording, setup: Setup, first: dict) -> list[Finding]:
    bns = [
        m
        for m in setup.model.modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training
    ]
    if not bns or not first or len(first["step"].window) < 2:
        return []
    step, w = first["step"], first["window"]
    names = [n for n, _ in setup.model.named_parameters()]
    probe = copy.deepcopy(setup.model)
    with torch.no_grad():
        for n, p in probe.named_parameters():
            p.copy_(step.params[n])
    window = [setup.batch(b) for b in step.window]
    joined = Data(torch.cat([d.x for d in window]), torch.cat([d.y for d in window]))
    big = vec(full_batch_grads(probe, joined, loss=setup.loss), names)
    diff = grad_diff(w.reference, big)
    # running statistics: how many updates the first window made before its optimizer step
    updates = rec.steps[0].norm_updates - int(bns[0].num_batches_tracked or 0)
    m = bns[0].momentum if bns[0].momentum is not None else 0.1
    text = message(
        "BATCHNORM_STATS",
        rel_l2=diff.rel_l2,
        step=step.index,
        updates=updates,
        momentum=m,
        kept=(1 - m) ** updates,
        one=1 - m,
    )
    evidence = {
        "BatchNorm layers": len(bns),
        "relative L2, accumulated vs one big batch": diff.rel_l2,
        "running-stat updates in the first window": updates,
        "momentum": m,
    }
    return [Finding("BATCHNORM_STATS", text, evidence, (step.index,))]
