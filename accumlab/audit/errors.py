"""Detector: loops that cannot be audited — they raised, never stepped, ran away or changed the
model's layers (lesson 08)."""

from __future__ import annotations

from torch import nn

from .findings import Finding
from .guard import AuditStopped
from .messages import message
from .recording import Recording
from .spec import Setup


def _said(err: BaseException) -> str:
    """The error's message, or a placeholder when its own __str__ raises."""
    try:
        return str(err)
    except Exception:
        return "(its message could not be printed)"


def _error_text(err: BaseException) -> str:
    """`Type: message`, cut to its first sentence: torch's messages run on with advice."""
    text = _said(err).strip()
    first = text.split(". ")[0].rstrip(".")
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def error_findings(rec: Recording, setup: Setup) -> list[Finding]:
    """Findings when the function could not be audited, or [] when it can be."""
    err = rec.error
    if err is not None:
        text = _error_text(err)
        if isinstance(err, AuditStopped):
            return [_stopped(err, rec, setup)]
        if rec.error_where == "scaler.unscale_":
            calls = [pos for name, pos, _ in rec.scaler_calls if name == "unscale_"]
            return [
                Finding(
                    "UNSCALE_MISUSE",
                    message("UNSCALE_MISUSE", "raised", error=text),
                    {
                        "unscale_ calls (micro-batches done)": calls,
                        "optimizer steps": len(rec.steps),
                    },
                )
            ]
        if rec.error_where.startswith("scaler."):
            return [
                Finding(
                    "SCALER_MISUSE",
                    message("SCALER_MISUSE", "raised", where=rec.error_where, error=text),
                    {"scaler calls": [f"{n}@{p}" for n, p, _ in rec.scaler_calls]},
                )
            ]
        where = f" at {rec.error_line}" if rec.error_line else ""
        when = f" in epoch {rec.error_epoch + 1} of {setup.epochs}" if rec.error_epoch else ""
        return [
            Finding(
                "STEP_RAISED",
                message("STEP_RAISED", error=text, where=where, when=when),
                {
                    "error": f"{type(err).__name__}: {_said(err)}",
                    "forward passes before the error": len(rec.forwards),
                    "optimizer steps": len(rec.steps),
                },
            )
        ]
    changed = _shape_changes(setup.model, rec.model)
    if changed:
        return [
            Finding(
                "MODEL_CHANGED",
                message("MODEL_CHANGED", changes="; ".join(changed[:3])),
                {"changes": changed},
            )
        ]
    if rec.untracked:  # gradient the audit cannot attribute to any micro-batch
        count, norm = len(rec.untracked), rec.untracked[0][1]
        text = message("FORWARD_NOT_SEEN", count=count, norm=norm)
        evidence = {
            "backward passes through no forward of model(...)": count,
            "gradient norm each added": [n for _, n in rec.untracked],
            "forwards seen": len(rec.forwards),
        }
        return [Finding("FORWARD_NOT_SEEN", text, evidence)]
    if not rec.steps:
        variant = "no_step" if rec.forwards else "no_forward"
        return [
            Finding(
                "NO_STEPS",
                message("NO_STEPS", variant, forwards=len(rec.forwards)),
                {
                    "forward passes": len(rec.forwards),
                    "expected optimizer steps": len(setup.windows),
                },
            )
        ]
    return []


CALL_NAMES = {
    "zero_grads": "zero_grad()",
    "scheduler_steps": "scheduler.step()",
    "scaler_calls": "the GradScaler",
}


def _stopped(err: AuditStopped, rec: Recording, setup: Setup) -> Finding:
    """RUNAWAY_LOOP: what ran past its bound, and how far the loop had got."""
    variant = err.reason if err.reason in ("time", "forwards", "steps") else "calls"
    where = f" at {rec.error_line}" if rec.error_line else ""
    text = message(
        "RUNAWAY_LOOP",
        variant,
        limit=err.detail,
        forwards=len(rec.forwards),
        steps=len(rec.steps),
        micro_batches=_micro_batches(setup),
        what=CALL_NAMES.get(err.reason, err.reason),
        where=where,
    )
    evidence = {
        "stopped by": "the time limit" if err.reason == "time" else f"the {err.reason} budget",
        "forward passes": len(rec.forwards),
        "optimizer steps": len(rec.steps),
        "zero_grad calls": len(rec.zero_grads),
    }
    return Finding("RUNAWAY_LOOP", text, evidence)


def _micro_batches(setup: Setup) -> str:
    """'10', or '2 epochs of 10': what the budget was counted for."""
    return f"{setup.epochs} epochs of {setup.n}" if setup.epochs > 1 else str(setup.n)


def _shape_changes(before: nn.Module, after: nn.Module) -> list[str]:
    old = {n: tuple(p.shape) for n, p in before.named_parameters()}
    new = {n: tuple(p.shape) for n, p in after.named_parameters()}
    out = [f"{n} removed" for n in old if n not in new]
    out += [f"{n} added {new[n]}" for n in new if n not in old]
    out += [f"{n}: {old[n]} → {new[n]}" for n in old if n in new and old[n] != new[n]]
    return out
