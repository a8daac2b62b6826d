"""Findings from the per-step gradient comparison: one per code, each naming the other codes met
at the same steps; a 'not verifiable' finding where explanations could not be told apart; an
'unexplained' one where nothing fits (lesson 08)."""

from __future__ import annotations

import math

import torch

from .findings import CODES, Finding
from .gradients import SCALE_ONLY, GradientResult, StepMatch
from .hypotheses import ratio
from .messages import message
from .phrases import describe, phrase
from .recording import Recording
from .spec import Setup
from .unexplained import cosine as _cosine
from .unexplained import unexplained_finding

CLIPPED_AT = "clipping bit at steps"  # evidence key: the clip set those steps' length (ratio 1)


def _suggest(ms: list[StepMatch], setup: Setup) -> float:
    """A max_norm above every gradient norm before clipping, even one k times too large."""
    return float(f"{1.1 * setup.k * max(float(m.reference.norm()) for m in ms):.2g}")


def _moved(rec: Recording, m: StepMatch) -> bool:
    step = rec.steps[m.step]
    after = (
        rec.steps[m.step + 1].params
        if m.step + 1 < len(rec.steps)
        else {n: p.detach() for n, p in rec.model.named_parameters()}
    )
    return any(not torch.equal(step.params[n], after[n]) for n in step.params)


def _variant(code: str, m: StepMatch, rec: Recording, setup: Setup) -> tuple[str | None, dict]:
    """Which situation of `code` the first affected step shows, and the numbers its text needs."""
    n, k = len(m.window), setup.k
    how = m.chosen.how if m.chosen is not None else {}
    if code == "UNSCALE_MISUSE" and how.get("clip") == "scaled":
        return "clip_before_unscale", {"threshold": setup.max_norm / m.scale}
    if code in ("UNSCALE_MISUSE", "SCALER_MISUSE"):
        mults = [float(f"{x:.3g}") for x in (m.mults or [])]
        if code == "SCALER_MISUSE" and m.mults and all(abs(x - m.scale) < 1e-9 for x in m.mults):
            return "not_unscaled", {}
        return ("inside_window" if code == "UNSCALE_MISUSE" else "update_inside"), {"mults": mults}
    if code == "ZERO_GRAD_IN_WINDOW":
        end = rec.steps[m.step].position
        return None, {"zeros": sum(1 for z in rec.zero_grads if end - n < z < end)}
    if code == "ZERO_GRAD_BEFORE_STEP":
        moved = _moved(rec, m)
        return None, {"moved": "parameters still moved" if moved else "no parameter moved"}
    if code == "LAST_WINDOW_UNDERWEIGHTED":
        return None, {"weight": n / k, "policy": "divide_by_k"}
    if code == "LAST_WINDOW_AVERAGED":
        return None, {"weight": k / n, "policy": "divide_by_actual"}
    if code == "LAST_WINDOW_CARRIED":
        why = (
            f" (each micro-batch's loss divided by k = {k}, as here, gives {n}/{k} = {n / k:.3g} "
            "times their mean)"
            if how.get("weights") in ("items_k", "means_k")
            else ""
        )
        end = (
            "; the last epoch's tail is still in .grad when the run ends."
            if rec.leftover_grad_norm > 0
            else "."
        )
        measured = ratio(m.seen, m.whole) if m.whole is not None else math.nan
        fields = {"size": m.carried, "own": n - m.carried, "total": n, "measured": measured}
        # clipping that bit (to max_norm, or on partial or still-scaled sums) set the step's
        # length: the ratio says nothing about the window then
        clipped = how.get("clip") in ("micro", "scaled") or (
            setup.max_norm is not None and float(m.seen.norm()) >= 0.999 * setup.max_norm
        )
        return ("clipped" if clipped else "measured"), {**fields, "why": why, "end": end}
    if code == "CARRIED_WINDOW_ZEROED":
        gone = int(how.get("zero", "epoch 0").split()[1])
        return None, {"gone": gone, "kept": n - gone, "seen": [s.position for s in rec.steps]}
    return None, {}


def _explained(code: str, ms: list[StepMatch], rec: Recording, setup: Setup) -> Finding:
    m = ms[0]
    steps = tuple(x.step for x in ms)
    variant, extra = _variant(code, m, rec, setup)
    if code == "LOSS_DIVIDED_TWICE":
        extra = {"ratios": [round(x.ratio, 4) for x in ms], "sizes": [len(x.window) for x in ms]}
    fields = {
        "step": m.step,
        "steps": list(steps),
        "size": len(m.window),
        "k": setup.k,
        "max_norm": setup.max_norm,
        "counts": m.counts,
        "norm": float(m.seen.norm()),
        "scale": m.scale,
        **extra,
    }
    text = message(code, variant, **fields)
    if code != "ZERO_GRAD_BEFORE_STEP" and m.chosen is not None:
        seen = describe(m.chosen.how, len(m.window), setup.k)
        text += phrase("seen", step=m.step, description=seen, ratio=m.ratio, cosine=_cosine(m))
    others = sorted(set().union(*(x.codes for x in ms)) - {code})
    if others:
        text += phrase("together", others=", ".join(others))
    saturated = [x for x in ms if x.saturated]
    if code in SCALE_ONLY and saturated:
        text += phrase(
            "saturated", steps=[x.step for x in saturated], suggest=_suggest(saturated, setup)
        )
    evidence: dict = {"steps": list(steps)}
    if code == "ZERO_GRAD_BEFORE_STEP":  # a zero gradient has no direction to compare
        evidence["‖seen‖"] = [float(x.seen.norm()) for x in ms]
    else:
        evidence["‖seen‖ / ‖reference‖"] = [x.ratio for x in ms]
        evidence["cosine"] = [_cosine(x) for x in ms]
    if code in ("LOSS_NOT_DIVIDED", "LOSS_DIVIDED_TWICE"):
        evidence["window sizes"] = [len(x.window) for x in ms]
    if code == "LAST_WINDOW_CARRIED":
        evidence["micro-batches in the step's window"] = [len(x.window) for x in ms]
        evidence["of them from the previous epoch"] = [x.carried for x in ms]
        evidence["‖seen‖ / ‖their mean‖"] = [ratio(x.seen, x.whole) for x in ms]
    if code == "MEAN_OF_MEANS":
        evidence["items per micro-batch"] = m.counts
        evidence["relative L2 difference"] = m.diff.rel_l2
    if code in ("UNSCALE_MISUSE", "SCALER_MISUSE"):
        evidence["scale"] = m.scale
        evidence["norms seen"] = [float(x.seen.norm()) for x in ms]
        if (
            m.mults is not None
            and m.chosen is not None
            and m.chosen.how.get("scaler") == "replayed"
        ):
            evidence["net multiplier per micro-batch (first step)"] = m.mults
    if code == "ZERO_GRAD_IN_WINDOW":
        evidence["zero_grad calls between a window's forwards"] = [
            _variant(code, x, rec, setup)[1]["zeros"] for x in ms
        ]
    if code == "NOT_CLIPPED":
        evidence["norms seen"] = [float(x.seen.norm()) for x in ms]
    if saturated and all(abs(x.ratio - 1) < 1e-3 for x in saturated):
        evidence[CLIPPED_AT] = [x.step for x in saturated]  # ratios of 1: the clip set the length
    return Finding(code, text, evidence, steps)


def _not_verified(ms: list[StepMatch], setup: Setup) -> Finding:
    saturated = [m for m in ms if m.saturated]
    options = " or ".join(sorted(set().union(*(m.uncertain for m in ms)))) + " or neither"
    fields = {"steps": [m.step for m in ms], "options": options, "rtol": setup.rtol}
    if saturated:
        fields.update(
            norm=max(float(m.reference.norm()) for m in saturated),
            max_norm=setup.max_norm,
            suggest=_suggest(saturated, setup),
        )
    variant = "clipping" if saturated else "resolution"
    evidence = {
        "steps": fields["steps"],
        "could be": sorted(set().union(*(m.uncertain for m in ms))),
        "norm before clipping (reference)": [float(m.reference.norm()) for m in ms],
    }
    return Finding(
        "GRADIENT_NOT_VERIFIED", message("GRADIENT_NOT_VERIFIED", variant, **fields), evidence
    )


def gradient_findings(result: GradientResult, rec: Recording, setup: Setup) -> list[Finding]:
    by_code: dict[str, list[StepMatch]] = {}
    for m in result.matches:
        for code in m.codes:
            by_code.setdefault(code, []).append(m)
    findings = [_explained(code, by_code[code], rec, setup) for code in CODES if code in by_code]
    unverified = [m for m in result.matches if m.uncertain]
    if unverified:
        findings.append(_not_verified(unverified, setup))
    unexplained = [m for m in result.matches if m.aligned and m.chosen is None]
    if unexplained:
        findings.append(unexplained_finding(unexplained, result, rec, setup))
    return findings
