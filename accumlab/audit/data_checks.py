"""Detectors: non-finite values (where the first one appeared), micro-batches a loop changed in
place, and a torch.autocast PyTorch switched off (lesson 08)."""

from __future__ import annotations

import torch

from .findings import Finding
from .messages import message
from .recording import Recording
from .spec import Setup


def _first_bad(t: torch.Tensor) -> int | None:
    if not t.is_floating_point():
        return None
    bad = ~torch.isfinite(t.reshape(len(t), -1)).all(dim=1)
    return int(bad.nonzero()[0]) if bool(bad.any()) else None


def _in_data(setup: Setup) -> str | None:
    start = 0
    for b, mb in enumerate(setup.batches):
        for what, t in (("inputs", mb.x), ("targets", mb.y)):
            row = _first_bad(t)
            if row is not None:
                kind = "NaN" if bool(torch.isnan(t[row]).any()) else "an infinite value"
                return (
                    f"in the data: micro-batch {b}'s {what} hold {kind} at its sample {row} "
                    f"(sample {start + row} of the data set), before your loop ran"
                )
        start += len(mb)
    return None


def finite_findings(rec: Recording, setup: Setup) -> list[Finding]:
    skipped = {s.index for s in rec.steps if s.skipped}
    bad_steps = [
        s.index
        for s in rec.steps
        if s.index not in skipped  # GradScaler skipped them for their inf/NaN: SCALER_SKIPPED_STEPS
        and not all(bool(torch.isfinite(g).all()) for g in s.grads.values())
    ]
    output, backward = rec.first_nonfinite_output, rec.first_nonfinite_backward
    caught = rec.nonfinite_backward_steps <= skipped  # each overflow reached a step it skipped
    if backward is not None and caught and len(skipped) < len(rec.steps):
        backward = None  # what the GradScaler is for (and the loop trained at its other steps)
    if output is None and backward is None and not bad_steps:
        return []
    where = _in_data(setup)
    # whichever came first: a NaN output, or a NaN gradient flowing back into a finite output
    if where is None and output is not None and (backward is None or output[0] <= backward[0]):
        where = (
            f"in the model's output at forward pass {output[0]} (micro-batch {output[1]}), "
            "although the data is finite: look at the model's parameters or at what the loop "
            "did before that forward"
        )
    if where is None and backward is not None:
        where = (
            f"in the gradient flowing back into the output of forward pass {backward[0]} "
            f"(micro-batch {backward[1]}), although that output was finite: the loss or a "
            "division in the loop (by a zero count?) produced it"
        )
    if where is None:
        step = rec.steps[bad_steps[0]]
        where = f"in the gradient at optimizer step {step.index}"
    compared = f" (steps {bad_steps} have non-finite gradients)" if bad_steps else ""
    text = message("NON_FINITE", where=where, compared=compared)
    evidence = {"steps with non-finite gradients": bad_steps}
    return [Finding("NON_FINITE", text, evidence, tuple(bad_steps))]


def modified_findings(rec: Recording) -> list[Finding]:
    if not rec.modified:
        return []
    text = message("BATCH_MODIFIED", batches=rec.modified)
    return [Finding("BATCH_MODIFIED", text, {"micro-batches changed": rec.modified})]


def autocast_findings(rec: Recording, setup: Setup) -> list[Finding]:
    """torch.autocast("cuda") on a machine without CUDA (or a dtype the device's autocast lacks)
    warns and runs in full precision; with CUDA present it stays on but leaves the audit's CPU
    tensors alone, without a warning: either way the audit checked the loop, not its lower
    precision."""
    warning = next((w for w in rec.warnings if "Disabling autocast" in w), None)
    if warning is None and not rec.idle_autocast:
        return []
    dtypes = [p.dtype for p in setup.model.parameters() if p.is_floating_point()]
    dtype = str(dtypes[0]).removeprefix("torch.") if dtypes else "float32"
    if warning is not None:
        first = warning.split("\n")[0]
        text = message("AUTOCAST_DISABLED", "warned", warning=first)
        evidence = {"PyTorch warned": first}
    else:
        text = message("AUTOCAST_DISABLED", "idle", forwards=rec.idle_autocast)
        evidence = {'forwards under torch.autocast("cuda") on CPU inputs': rec.idle_autocast}
    text += message("AUTOCAST_DISABLED", "then", dtype=dtype)
    return [Finding("AUTOCAST_DISABLED", text, evidence)]
