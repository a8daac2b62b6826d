"""What lesson 06's results look like, so its plots and report can say what is wrong with a dict
they are handed (a hand-built or partial one) instead of failing inside with a KeyError."""

from __future__ import annotations

from .._validate import nonempty, result

SWEEP = {"ks": nonempty([int]), "errors": {str: nonempty([float])}}
CURVES = {"k": int, "warmup_steps": int, "lrs": {str: nonempty([float])}, "warmup_end": dict}
REAL = {
    "k": int,
    "optimizer_steps": int,
    "lrs": {str: {str: [float]}},
    "errors": {str: {str: (str, type(None))}},
}
CLIP_SWEEP = {"ratios": nonempty([float]), "cosine": nonempty([float]), "full_norm": float}
CONVENTIONS = {
    "windows": int,
    "schedule": nonempty([float]),
    "lrs": {str: nonempty([float])},
    "skipped": {str: nonempty([bool])},
}
EXPLORER = {
    "k": int,
    "max_norm": (float, type(None)),
    "lr_max": float,
    "update_norms": nonempty([float]),
    "reference_update_norms": nonempty([float]),
    "lrs": [float],
    "reference_lrs": [float],
    "precision": SWEEP,
    "accumulation_error": float,
}
FLOAT16_SKIPS = {"seeds": nonempty([int]), "correct": [[bool]], "silent": [[bool]]}
_ORDER = {
    "grad_rel_l2_vs_float32": [float],
    "skipped": [bool],
    "scale_changes_inside_windows": int,
}
RECORD = {
    "autocast_dtype": str,
    "device_type": str,
    "orders": {str: _ORDER},
    "errors": dict,
    "accumulation_errors": SWEEP,
}


def traces(name: str, value) -> dict:
    """{label: AmpTrace}, at least one."""
    from .amp import AmpTrace

    return result(
        name, value, {str: AmpTrace}, "a dict from labels to results of al.precision.amp_train(...)"
    )


def sweep(name: str, value) -> dict:
    return result(name, value, SWEEP, "what al.precision.accumulation_errors(...) returns")


def curves(name: str, value) -> dict:
    return result(name, value, CURVES, "what al.precision.schedule_curves(...) returns")


def real(name: str, value) -> dict:
    return result(name, value, REAL, "what al.precision.real_schedules(...) returns")


def clip_sweep(name: str, value) -> dict:
    return result(name, value, CLIP_SWEEP, "what al.precision.clipping_sweep(...) returns")


def conventions(name: str, value) -> dict:
    return result(name, value, CONVENTIONS, "what al.precision.skip_conventions(...) returns")


def float16_skips(name: str, value) -> dict:
    return result(name, value, FLOAT16_SKIPS, "what al.precision.float16_skips(...) returns")


def explorer(name: str, value) -> dict:
    return result(name, value, EXPLORER, "what al.precision.explorer_data(...) returns")


def record(name: str, value) -> dict:
    return result(
        name,
        value,
        RECORD,
        "what al.precision.record_results(...) returns (or the recorded file holds)",
    )
