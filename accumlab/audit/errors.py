"""Detector: loops that cannot be audited — they raised, never stepped, ran away or changed the
model's layers (lesson 08)."""

from __future__ import annotations

from torch import nn

from .findings import Finding
from .messages import message
from .runner import Recording, RunawayLoop
from .spec import Setup


def _error_text(err: BaseException) -> str:
    """`Type: message`, cut to its first sentence: torch's messages run on with advice."""
    text = str(err).strip()
    first = text.split(". ")[0].rstrip(".")
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def error_findings(rec: Recording, setup: Setup) -> list[Finding]:
    """Findings when the function could not be audited, or [] when it can be."""
    err = rec.error
    if err is not None:
        text = _error_text(err)
        if isinstance(err, RunawayLoop):
            return [
                Finding(
                    "RUNAWAY_LOOP",
                    message(
                        "RUNAWAY_LOOP",
                        limit=len(rec.forwards) - 1,
                        micro_batches=len(setup.batches),
                    ),
                    {"forward passes": len(rec.forwards)},
                )
            ]
        if rec.error_where == "scaler.unscale_":
            calls = [pos for name, pos in rec.scaler_calls if name == "unscale_"]
            return [
                Finding(
                    "UNSCALE_MISUSE",
                    message("UNSCALE_MISUSE", "raised", error=text),
                    {"unscale_ calls (forwards done)": calls, "optimizer steps": len(rec.steps)},
                )
            ]
        if rec.error_where.startswith("scaler."):
            return [
                Finding(
                    "SCALER_MISUSE",
                    message("SCALER_MISUSE", where=rec.error_where, error=text),
                    {"scaler calls": [f"{n}@{p}" for n, p in rec.scaler_calls]},
                )
            ]
        where = f" at {rec.error_line}" if rec.error_line else ""
        return [
            Finding(
                "STEP_RAISED",
                message("STEP_RAISED", error=text, where=where),
                {
                    "error": f"{type(err).__name__}: {err}",
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


def _shape_changes(before: nn.Module, after: nn.Module) -> list[str]:
    old = {n: tuple(p.shape) for n, p in before.named_parameters()}
    new = {n: tuple(p.shape) for n, p in after.named_parameters()}
    out = [f"{n} removed" for n in old if n not in new]
    out += [f"{n} added {new[n]}" for n in new if n not in old]
    out += [f"{n}: {old[n]} → {new[n]}" for n in old if n in new and old[n] != new[n]]
    return out
