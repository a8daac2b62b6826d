"""Detector: the gradient each optimizer step saw, against the reference and against what each
known bug predicts (lesson 08). A bug is named only when its prediction reproduces the measurement;
anything else is reported as unexplained, with the difference."""

from __future__ import annotations

import copy

from torch import nn

from ..compare import grad_diff
from .findings import Finding, StepCheck
from .hypotheses import clip, close, hypotheses, ratio, vec, window_grads
from .messages import PHRASES, message
from .runner import Recording
from .spec import Setup


def gradient_findings(rec: Recording, setup: Setup) -> tuple[list[Finding], list[StepCheck], dict]:
    names = [n for n, _ in setup.model.named_parameters()]
    windows = setup.windows
    probe = copy.deepcopy(setup.model)
    checks: list[StepCheck] = []
    matched: dict[str, list[dict]] = {}
    unexplained: list[dict] = []
    first_reference: dict = {}
    previous = None
    for step in rec.steps:
        seen = vec(step.grads, names)
        if step.window not in windows:  # a window the reference never has: no like-for-like
            checks.append(StepCheck(step.index, step.window, None))
            previous = seen
            continue
        w = window_grads(probe, step, setup, names)
        expected = clip(w.reference, setup.max_norm)
        scale = float(expected.norm())
        rel = float((seen - expected).norm()) / scale if scale else float((seen - expected).norm())
        if not first_reference:
            first_reference = {"step": step, "window": w}
        if close(seen, expected, scale, setup.rtol):
            checks.append(StepCheck(step.index, step.window, rel))
        else:
            code = next(
                (
                    code
                    for code, predicted in hypotheses(step, w, setup, previous)
                    if close(seen, predicted, scale, setup.rtol)
                ),
                None,
            )
            checks.append(StepCheck(step.index, step.window, rel, code))
            facts = {
                "step": step.index,
                "size": len(step.window),
                "counts": w.counts,
                "ratio": ratio(seen, w.reference),
                "diff": grad_diff(seen, expected),
                "norm": float(seen.norm()),
                "reference norm": float(w.reference.norm()),
                "scale": step.scale,
            }
            (matched.setdefault(code, []) if code else unexplained).append(facts)
        previous = seen
    if unexplained:
        finding = _unexplained(unexplained, checks, matched, _has_dropout(setup.model))
        return [finding], checks, first_reference
    findings = [_explained(code, facts, rec, setup) for code, facts in matched.items()]
    return findings, checks, first_reference


def _has_dropout(model: nn.Module) -> bool:
    return any(
        isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 and m.training
        for m in model.modules()
    )


def _unexplained(
    facts: list[dict], checks: list[StepCheck], matched: dict, dropout: bool
) -> Finding:
    first = facts[0]
    compared = sum(c.rel_error is not None for c in checks)
    also = {
        f"steps that looked like {code}": [f["step"] for f in fs] for code, fs in matched.items()
    }
    text = message(
        "UNEXPLAINED_GRADIENT",
        count=len(facts),
        compared=compared,
        step=first["step"],
        diff=first["diff"],
        why=PHRASES["dropout"] if dropout else "",
    )
    return Finding(
        "UNEXPLAINED_GRADIENT",
        text,
        {
            "steps": [f["step"] for f in facts],
            "‖seen‖ / ‖reference‖": [f["ratio"] for f in facts],
            "relative L2 difference": [f["diff"].rel_l2 for f in facts],
            "cosine": [f["diff"].cosine for f in facts],
            **also,
        },
        tuple(f["step"] for f in facts),
    )


def _explained(code: str, facts: list[dict], rec: Recording, setup: Setup) -> Finding:
    """The finding for one explained bug: the first affected step's numbers fill the message, the
    evidence lists every affected step."""
    f = facts[0]
    steps = tuple(x["step"] for x in facts)
    evidence = {"steps": list(steps), "‖seen‖ / ‖reference‖": [x["ratio"] for x in facts]}
    fields = {
        "step": f["step"],
        "size": f["size"],
        "ratio": f["ratio"],
        "norm": f["norm"],
        "cosine": f["diff"].cosine,
        "rel_l2": f["diff"].rel_l2,
        "counts": f["counts"],
        "k": setup.k,
        "max_norm": setup.max_norm,
    }
    variant = None
    if code == "LOSS_NOT_DIVIDED":
        evidence["window sizes"] = [x["size"] for x in facts]
    elif code == "ZERO_GRAD_IN_WINDOW":
        evidence["zero_grad calls between a window's forwards"] = [
            sum(1 for z in rec.zero_grads if p - x["size"] < z < p)
            for x, p in ((x, rec.steps[x["step"]].position) for x in facts)
        ]
    elif code == "GRADS_NEVER_ZEROED":
        evidence["zero_grad calls"] = len(rec.zero_grads)
    elif code == "MEAN_OF_MEANS":
        evidence["items per micro-batch"] = f["counts"]
        evidence["relative L2 difference"] = f["diff"].rel_l2
    elif code == "LAST_WINDOW_UNDERWEIGHTED":
        evidence["last window size"] = f["size"]
        evidence["k"] = setup.k
    elif code == "CLIP_PER_MICRO_BATCH":
        evidence["max_norm"] = setup.max_norm
        evidence["cosine"] = [x["diff"].cosine for x in facts]
    elif code == "NOT_CLIPPED":
        evidence["norms seen"] = [x["norm"] for x in facts]
    else:  # UNSCALE_MISUSE, measured from the gradient: clipping met still-scaled gradients
        variant = "clip_before_unscale"
        fields["scale"] = f["scale"]
        fields["threshold"] = setup.max_norm / f["scale"]
        evidence["scale"] = f["scale"]
        evidence["norms seen"] = [x["norm"] for x in facts]
    return Finding(code, message(code, variant, **fields), evidence, steps)
