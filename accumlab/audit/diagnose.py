"""Detectors: compare what a learner's loop did with the reference, and name the difference (lesson 08).

Every diagnosis is a measurement: the gradient each optimizer step saw is compared with what the
reference (the window's full-batch gradient, built from `al.full_batch_grads`) and with what each
known bug would have produced at the same parameters. Only a bug that reproduces the measured
gradient is named; anything else is reported as unexplained, with the difference.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

from ..compare import grad_diff
from ..data import Data
from ..losses import Loss
from ..reference import full_batch_grads
from .findings import Finding, StepCheck
from .runner import Recording, RunawayLoop, StepRecord


def lr_factor(step: int) -> float:
    """The audit's learning-rate schedule: a strictly decreasing factor, so a scheduler stepped too
    often or too rarely shows up in the learning rate of the very first optimizer step it affects."""
    return 1.0 / (1.0 + step)


@dataclass(frozen=True)
class Setup:
    """What the reference does: micro-batches in order, windows of k, the short last window averaged
    over what it holds, every item of a window weighted equally, clipping once before the step."""

    model: nn.Module
    batches: list[Data]
    k: int
    loss: Loss
    lr: float
    max_norm: float | None = None
    scheduler: bool = False
    scaler: bool = False
    rtol: float = 1e-6

    @property
    def windows(self) -> list[tuple[int, ...]]:
        n = len(self.batches)
        return [tuple(range(i, min(i + self.k, n))) for i in range(0, n, self.k)]

    @property
    def positions(self) -> list[int]:
        """Micro-batches forwarded when each reference optimizer step happens."""
        return [w[-1] + 1 for w in self.windows]


# ---------------------------------------------------------------- helpers on flat gradient vectors


def _vec(grads: dict[str, torch.Tensor], names: list[str]) -> torch.Tensor:
    return torch.cat([grads[n].detach().reshape(-1).double().cpu() for n in names])


def _clip(v: torch.Tensor, max_norm: float | None) -> torch.Tensor:
    if max_norm is None:
        return v
    # the same coefficient torch.nn.utils.clip_grad_norm_ applies (its 1e-6 included)
    return v * min(1.0, max_norm / (float(v.norm()) + 1e-6))


def _close(a: torch.Tensor, b: torch.Tensor, scale: float, rtol: float) -> bool:
    return float((a - b).norm()) <= rtol * max(scale, 1e-300)


def _ratio(a: torch.Tensor, b: torch.Tensor) -> float:
    nb = float(b.norm())
    return float(a.norm()) / nb if nb else math.inf


# ---------------------------------------------------------------- errors and bad input


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
                    f"Your function ran more than {len(rec.forwards) - 1} forward passes for "
                    f"{len(setup.batches)} micro-batches, so the audit stopped it: does the loop end?",
                    {"forward passes": len(rec.forwards)},
                )
            ]
        if rec.error_where == "scaler.unscale_":
            calls = [pos for name, pos in rec.scaler_calls if name == "unscale_"]
            return [
                Finding(
                    "UNSCALE_MISUSE",
                    f"scaler.unscale_(optimizer) was called again before scaler.update(), which "
                    f"PyTorch refuses ({text}). Call unscale_ once per optimizer step: after the "
                    "window's last backward, right before clipping and scaler.step.",
                    {"unscale_ calls (forwards done)": calls, "optimizer steps": len(rec.steps)},
                )
            ]
        if rec.error_where.startswith("scaler."):
            return [
                Finding(
                    "SCALER_MISUSE",
                    f"{rec.error_where}() raised {text}. The order per window is: scaler.scale(loss)"
                    ".backward() for every micro-batch, then unscale_, clip, scaler.step, "
                    "scaler.update once.",
                    {"scaler calls": [f"{n}@{p}" for n, p in rec.scaler_calls]},
                )
            ]
        where = f" at {rec.error_line}" if rec.error_line else ""
        return [
            Finding(
                "STEP_RAISED",
                f"Your function raised {text}{where}. Nothing after that could be audited.",
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
                "After your function ran, the model's parameters no longer have the same names and "
                f"shapes ({'; '.join(changed[:3])}). A training loop updates values, it does not "
                "replace layers: the audit cannot compare gradients.",
                {"changes": changed},
            )
        ]
    if not rec.steps:
        what = (
            "never ran the model on the micro-batches it was given"
            if not rec.forwards
            else f"ran {len(rec.forwards)} forward passes but never called optimizer.step() on the "
            "optimizer it was given (did it build its own?)"
        )
        return [
            Finding(
                "NO_STEPS",
                f"Your function {what}, so nothing was trained.",
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


# ---------------------------------------------------------------- when the optimizer stepped


def schedule_findings(rec: Recording, setup: Setup) -> list[Finding]:
    n, k = len(setup.batches), setup.k
    expected = setup.positions
    seen = [s.position for s in rec.steps]
    windows = [s.window for s in rec.steps]
    evidence = {"steps after micro-batches (seen)": seen, "reference": expected}
    if seen == expected and windows == setup.windows and len(rec.forwards) == n:
        return []
    if k > 1 and seen == list(range(1, n + 1)):
        return [
            Finding(
                "STEP_EVERY_MICRO_BATCH",
                f"optimizer.step() ran after every micro-batch: {len(seen)} steps for {n} "
                f"micro-batches instead of {len(expected)}, so nothing was accumulated. Step only "
                f"when a window of k = {k} micro-batches (or the epoch) is complete.",
                evidence,
            )
        ]
    if seen == expected[:-1] and windows == setup.windows[:-1]:
        tail = setup.windows[-1]
        forwarded = set(rec.forwards) >= set(tail)
        samples = sum(len(setup.batches[i]) for i in tail)
        how = (
            "their gradients were computed, then never used by an optimizer step"
            if forwarded
            else "they were never forwarded"
        )
        return [
            Finding(
                "LAST_WINDOW_DROPPED",
                f"The last window ({len(tail)} micro-batch(es), {samples} samples) never reaches the "
                f"optimizer: {how}. Step once more when the epoch ends inside a window.",
                {**evidence, "samples left out per epoch": samples},
            )
        ]
    body = seen[:-1] if len(seen) > 1 and seen[-1] == n and seen[-1] - seen[-2] != k else seen
    regular = len(body) >= 2 and all(b - a == k for a, b in zip(body, body[1:], strict=False))
    if k > 1 and regular and body[0] != k:
        return [
            Finding(
                "OFF_BY_ONE_SCHEDULE",
                f"The first optimizer step came after {body[0]} micro-batch(es) instead of k = {k}, "
                "so every window is shifted and the first one is the wrong size. With a 0-based "
                "counter i, step when (i + 1) % k == 0 (or at the epoch's last micro-batch).",
                evidence,
            )
        ]
    return [
        Finding(
            "UNEXPLAINED_SCHEDULE",
            "The optimizer stepped after a pattern of micro-batches the audit does not recognise "
            f"(seen {seen}, reference {expected}); the micro-batches forwarded between steps were "
            f"{[list(w) for w in windows][:6]}.",
            evidence,
        )
    ]


# ---------------------------------------------------------------- what gradient each step saw


@dataclass
class _Window:
    """Per-micro-batch mean gradients M_b and item counts c_b at the parameters the window ran at."""

    means: list[torch.Tensor]
    counts: list[int]

    @property
    def terms(self) -> list[torch.Tensor]:
        total = sum(self.counts)
        return [
            c * m / total for m, c in zip(self.means, self.counts, strict=True)
        ]  # each item weighs 1/N

    @property
    def reference(self) -> torch.Tensor:
        return sum(self.terms)


def _window_grads(probe: nn.Module, step: StepRecord, setup: Setup, names: list[str]) -> _Window:
    with torch.no_grad():
        for n, p in probe.named_parameters():
            p.copy_(step.params[n])
    means = [
        _vec(full_batch_grads(probe, setup.batches[b], loss=setup.loss), names) for b in step.window
    ]
    counts = [setup.loss.count(setup.batches[b].y) for b in step.window]
    return _Window(means, counts)


def _hypotheses(step: StepRecord, w: _Window, setup: Setup, previous: torch.Tensor | None):
    """(code, predicted gradient) for each known bug that could apply to this window, in the order
    they are tried. Each prediction is what that bug computes at the same parameters."""
    c, n, k = setup.max_norm, len(w.means), setup.k
    terms = w.terms
    mean_terms = [m / n for m in w.means]  # loss / window_len with each micro-batch's own mean
    if n > 1:
        yield "LOSS_NOT_DIVIDED", _clip(sum(w.means), c)
    if previous is not None:
        yield "GRADS_NEVER_ZEROED", _clip(previous + w.reference, c)
    for start in range(1, n):
        yield "ZERO_GRAD_IN_WINDOW", _clip(sum(terms[start:]), c)
        yield "ZERO_GRAD_IN_WINDOW", _clip(sum(mean_terms[start:]), c)
    yield "MEAN_OF_MEANS", _clip(sum(mean_terms), c)
    if n < k:
        yield "LAST_WINDOW_UNDERWEIGHTED", _clip(w.reference * n / k, c)
        yield "LAST_WINDOW_UNDERWEIGHTED", _clip(sum(w.means) / k, c)
    if c is not None:
        for parts in (terms, mean_terms):
            running = torch.zeros_like(w.reference)
            for t in parts:  # clip_grad_norm_ after each backward clips the running sum in .grad
                running = _clip(running + t, c)
            yield "CLIP_PER_MICRO_BATCH", running
        yield "NOT_CLIPPED", w.reference
        if step.scale is not None:  # clipping before unscale_: the threshold meets scaled gradients
            yield "UNSCALE_MISUSE", _clip(w.reference * step.scale, c) / step.scale


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
        seen = _vec(step.grads, names)
        if step.window not in windows:  # a window the reference never has: no like-for-like
            checks.append(StepCheck(step.index, step.window, None))
            previous = seen
            continue
        w = _window_grads(probe, step, setup, names)
        expected = _clip(w.reference, setup.max_norm)
        scale = float(expected.norm())
        rel = float((seen - expected).norm()) / scale if scale else float((seen - expected).norm())
        if not first_reference:
            first_reference = {"step": step, "window": w}
        if _close(seen, expected, scale, setup.rtol):
            checks.append(StepCheck(step.index, step.window, rel))
        else:
            code = next(
                (
                    code
                    for code, predicted in _hypotheses(step, w, setup, previous)
                    if _close(seen, predicted, scale, setup.rtol)
                ),
                None,
            )
            checks.append(StepCheck(step.index, step.window, rel, code))
            facts = {
                "step": step.index,
                "size": len(step.window),
                "counts": w.counts,
                "ratio": _ratio(seen, w.reference),
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
    why = (
        " The model has active Dropout: its random masks differ between your run and the "
        "reference, so audit with dropout switched off."
        if dropout
        else ""
    )
    return Finding(
        "UNEXPLAINED_GRADIENT",
        f"At {len(facts)} of {compared} compared optimizer steps the gradient the optimizer saw "
        f"differs from the reference, and none of the known bugs reproduces it. First at step "
        f"{first['step']}: {first['diff']}.{why}",
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
    f = facts[0]
    steps = tuple(x["step"] for x in facts)
    ratios = [x["ratio"] for x in facts]
    base = {"steps": list(steps), "‖seen‖ / ‖reference‖": ratios}
    k, c = setup.k, setup.max_norm
    if code == "LOSS_NOT_DIVIDED":
        message = (
            f"Each micro-batch's loss reaches backward undivided, so the optimizer sees the sum of "
            f"the window's gradients: {f['ratio']:.3g}× the reference at step {f['step']} (a "
            f"window of {f['size']}). Divide each loss by the number of micro-batches in its window."
        )
        return Finding(code, message, {**base, "window sizes": [x["size"] for x in facts]}, steps)
    if code == "ZERO_GRAD_IN_WINDOW":
        zeros = [
            sum(1 for z in rec.zero_grads if p - x["size"] < z < p)
            for x, p in ((x, rec.steps[x["step"]].position) for x in facts)
        ]
        message = (
            f"Gradients are zeroed inside the window, so the micro-batches before it are erased: "
            f"at step {f['step']} the optimizer saw {f['ratio']:.3g}× the reference's size, "
            f"pointing elsewhere (cosine {f['diff'].cosine:.4f}). Zero once per window, right "
            "after optimizer.step()."
        )
        return Finding(
            code, message, {**base, "zero_grad calls between a window's forwards": zeros}, steps
        )
    if code == "GRADS_NEVER_ZEROED":
        message = (
            f"Gradients are not zeroed after optimizer.step(), so step {f['step']} also carries "
            f"every earlier window's gradient ({f['ratio']:.3g}× the reference's size). Call "
            "optimizer.zero_grad() after every optimizer.step()."
        )
        return Finding(code, message, {**base, "zero_grad calls": len(rec.zero_grads)}, steps)
    if code == "MEAN_OF_MEANS":
        message = (
            f"Each micro-batch's loss is averaged over its own items, then the window averages "
            f"those means, so an item in a small micro-batch weighs more than one in a big one "
            f"(items per micro-batch at step {f['step']}: {f['counts']}; gradient off by "
            f"{f['diff'].rel_l2:.3g} relative). Sum the item losses and divide by the window's "
            "total number of items."
        )
        return Finding(
            code,
            message,
            {
                **base,
                "items per micro-batch": f["counts"],
                "relative L2 difference": f["diff"].rel_l2,
            },
            steps,
        )
    if code == "LAST_WINDOW_UNDERWEIGHTED":
        message = (
            f"The last window holds {f['size']} micro-batch(es) but its loss is divided by k = {k}, "
            f"so its samples weigh {f['ratio']:.3g}× what the others weigh. Divide by the number "
            "of micro-batches actually in the window."
        )
        return Finding(code, message, {**base, "last window size": f["size"], "k": k}, steps)
    if code == "CLIP_PER_MICRO_BATCH":
        message = (
            f"Gradients were clipped inside the window, on partial sums, instead of once after the "
            f"last backward: at step {f['step']} the optimizer saw a gradient of norm "
            f"{f['norm']:.4g} pointing off the reference (cosine {f['diff'].cosine:.4f}, "
            f"max_norm = {c}). Clip once, right before optimizer.step()."
        )
        return Finding(
            code,
            message,
            {**base, "max_norm": c, "cosine": [x["diff"].cosine for x in facts]},
            steps,
        )
    if code == "NOT_CLIPPED":
        message = (
            f"The audit asked for max_norm = {c}, but the optimizer saw a gradient of norm "
            f"{f['norm']:.4g} at step {f['step']}: it was never clipped. Clip once per window, "
            "right before optimizer.step()."
        )
        return Finding(code, message, {**base, "norms seen": [x["norm"] for x in facts]}, steps)
    # UNSCALE_MISUSE, measured from the gradient: clipping met gradients still multiplied by the scale
    message = (
        f"clip_grad_norm_ ran on gradients still multiplied by the GradScaler's scale "
        f"({f['scale']:g}), so it clipped to max_norm / scale = {c / f['scale']:.3g} instead of "
        f"{c}: the optimizer saw a gradient of norm {f['norm']:.3g}. Call "
        "scaler.unscale_(optimizer) once, right before clipping."
    )
    return Finding(
        code,
        message,
        {**base, "scale": f["scale"], "norms seen": [x["norm"] for x in facts]},
        steps,
    )


# ---------------------------------------------------------------- the learning-rate schedule


def scheduler_findings(rec: Recording, setup: Setup) -> list[Finding]:
    if not setup.scheduler:
        return []
    expected = [setup.lr * lr_factor(s.index) for s in rec.steps]
    seen = [s.lr for s in rec.steps]
    wrong = [
        i
        for i, (a, b) in enumerate(zip(seen, expected, strict=True))
        if abs(a - b) > 1e-12 * abs(b)
    ]
    if not wrong:
        return []
    i = wrong[0]
    calls, steps = len(rec.scheduler_steps), len(rec.steps)
    evidence = {
        "scheduler.step() calls": calls,
        "optimizer steps": steps,
        "lr at each step (seen)": seen,
        "reference": expected,
    }
    per_micro = calls == len(rec.forwards) and calls != steps
    code = "SCHEDULER_PER_MICRO_BATCH" if per_micro else "SCHEDULER_STEPS_WRONG"
    how = (
        f"once per micro-batch, so the schedule runs {calls / steps:.3g}× too fast"
        if per_micro
        else "not once per optimizer step"
    )
    message = (
        f"scheduler.step() ran {calls} times for {steps} optimizer steps — {how}: the learning "
        f"rate at step {i} was {seen[i]:.4g} instead of {expected[i]:.4g}. Step the scheduler "
        "once, right after each optimizer.step()."
    )
    return [Finding(code, message, evidence, tuple(wrong))]


# ---------------------------------------------------------------- BatchNorm


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
    window = [setup.batches[b] for b in step.window]
    joined = Data(torch.cat([d.x for d in window]), torch.cat([d.y for d in window]))
    big = _vec(full_batch_grads(probe, joined, loss=setup.loss), names)
    diff = grad_diff(w.reference, big)
    # running statistics: how many updates the first window made before its optimizer step
    updates = rec.steps[0].norm_updates - int(bns[0].num_batches_tracked or 0)
    m = bns[0].momentum if bns[0].momentum is not None else 0.1
    message = (
        "The model has BatchNorm in training mode: each micro-batch is normalised with its own "
        "mean and variance, so even a correct loop cannot reproduce the big batch's gradient "
        f"(relative difference {diff.rel_l2:.3g} at step {step.index}), and the running statistics "
        f"were updated {updates} times before the first optimizer step, leaving the old statistics "
        f"a weight of (1 − {m})^{updates} = {(1 - m) ** updates:.3g} instead of {1 - m:.3g}. "
        "Lesson 04 shows the remedies (GroupNorm/LayerNorm, frozen BN)."
    )
    evidence = {
        "BatchNorm layers": len(bns),
        "relative L2, accumulated vs one big batch": diff.rel_l2,
        "running-stat updates in the first window": updates,
        "momentum": m,
    }
    return [Finding("BATCHNORM_STATS", message, evidence, (step.index,))]
