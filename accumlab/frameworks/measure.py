"""Compare every optimizer step a framework took with the reference at the same weights, and say
what the measured gradient is — not guessed from the source (lesson 11).

For each step, at the weights the window ran at, three gradients are computed from the window's
micro-batches: the reference g_ref (Σ item losses ÷ items in the window: one big batch), and
g_means (Σ of the micro-batch MEAN losses, divided by nothing). A loop that divides each
micro-batch mean by D produces exactly g_means / D; one that weighs every item alike produces a
multiple of g_ref. Whichever the measured gradient is a multiple of names what the loss was divided
by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from .._threads import one_thread
from .._validate import instance
from ..compare import flatten
from ..data import Data
from ..engine import grads_of
from .hooks import FrameworkRun, StepSeen
from .problem import Problem

EXACT = 1e-10  # float64 round-off on these problems is ~1e-16; anything above 1e-10 is a real difference
# float32 runs (DeepSpeed refuses float64): round-off ~1e-7 relative; the differences the lesson
# measures (a short window ×0.5, tokens weighed unequally) are 1e-2 or more
EXACT_FLOAT32 = 1e-5
LOSS_MATCH = 1e-6  # logged losses: the Trainer sums them in a float32 tensor (~1e-7 relative)


@dataclass(frozen=True)
class StepCheck:
    """One optimizer step against the reference. Errors are relative: ‖a − b‖ / ‖b‖."""

    step: int
    window: tuple
    expected: tuple | None  # the reference's window at this step (None: the reference has none)
    grad_error: float  # used gradient vs reference
    scale: float  # ⟨used, ref⟩ / ⟨ref, ref⟩: the factor when the direction is right
    divided_by: str  # what the measured gradient says backward saw, e.g. "Σ means ÷ 4"
    pre_hook_error: float  # what a step PRE-hook saw vs what the step used
    lr: float
    expected_lr: float
    true_loss: float  # the window's item-weighted mean loss at these weights
    mean_of_means: float
    last_micro_loss: float
    logged_loss: float | None
    logged_as: str  # which of the candidates the logged loss equals ("" when nothing logged)
    grad_norm: float  # ‖used gradient‖
    reference_norm: float  # ‖reference gradient‖
    logged_grad_norm: float | None
    tolerance: float = EXACT  # below this relative error the step counts as exact (float32: 1e-5)
    # D with used = g_means / D (None: not a multiple of g_means). On equal micro-batches a step
    # can match both g_ref and g_means / D: `saw_label` then names the rule the run keeps
    means_divisor: float | None = None

    @property
    def loss_error(self) -> float:
        """Relative error of the logged loss against the true window loss; NaN when not logged."""
        if self.logged_loss is None:
            return math.nan
        return abs(self.logged_loss - self.true_loss) / abs(self.true_loss)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def tolerance(problem: Problem) -> float:
    """The relative difference below which a step counts as exact: float64 or float32 round-off."""
    return EXACT if problem.dtype == torch.float64 else EXACT_FLOAT32


def _multiple(a: torch.Tensor, b: torch.Tensor, exact: float = EXACT) -> float | None:
    """c with a = c·b to round-off, else None."""
    c = float(a @ b / (b @ b))
    return c if float((a - c * b).norm()) <= exact * max(float(a.norm()), 1e-300) else None


def _in_float64(problem: Problem) -> Problem:
    """The same problem (the same, possibly float32-rounded, values) computed in float64."""
    if problem.dtype == torch.float64:
        return problem
    x, y = problem.data.x, problem.data.y
    data = Data(
        x.double() if x.is_floating_point() else x, y.double() if y.is_floating_point() else y
    )
    return replace(problem, data=data, dtype=torch.float64)


def _window_terms(problem: Problem, params: dict, window: tuple) -> dict:
    """At `params`: g_ref, g_means and the candidate window losses, in float64."""
    problem = _in_float64(problem)
    model = problem.model()
    model.load_state_dict(params, strict=True)  # float32 weights are copied into float64 ones
    batches = problem.micro_batches()
    sums, counts = [], []
    for i in window:
        mb = batches[i]
        sums.append(problem.sum_loss(model(mb.x), mb.y))
        counts.append(problem.items(mb.y))
    total = sum(sums) / sum(counts)
    means = [s / c for s, c in zip(sums, counts)]
    model.zero_grad(set_to_none=True)
    total.backward(retain_graph=True)
    g_ref = grads_of(model)
    model.zero_grad(set_to_none=True)
    sum(means).backward()
    g_means = grads_of(model)
    return {
        "g_ref": flatten(g_ref),
        "g_means": flatten(g_means),
        "true": float(total.detach()),
        "mean_of_means": float(sum(means).detach()) / len(means),
        "sum_of_means": float(sum(means).detach()),
        "last": float(means[-1].detach()),
    }


def _divided_by(used: torch.Tensor, terms: dict, exact: float = EXACT) -> str:
    if float(used.norm()) == 0.0:  # 0 is a multiple of everything: "÷ 1/0" would raise
        return "a zero gradient"
    if _multiple(used, terms["g_ref"], exact) is not None and _rel(used, terms["g_ref"]) <= exact:
        return "Σ item losses ÷ window items"
    c = _multiple(used, terms["g_means"], exact)
    if c is not None:
        return f"Σ means ÷ {1 / c:.4g}"
    c = _multiple(used, terms["g_ref"], exact)
    if c is not None:
        return f"Σ item losses ÷ window items × {c:.4g}"
    return "neither a multiple of Σ means nor of the reference"


def _means_divisor(used: torch.Tensor, terms: dict, exact: float = EXACT) -> float | None:
    c = _multiple(used, terms["g_means"], exact) if float(used.norm()) else None
    return None if c is None else 1 / c


def saw_label(checks: list[StepCheck]) -> str:
    """What backward saw over a whole run, in one label. Where equal micro-batches make a step
    both exact and a Σ means ÷ D (the two coincide), the run's own rule is named: the reference
    when every step is exact ("equal here" lists the D), else Σ means ÷ D when every step is one."""
    divisors = [c.means_divisor for c in checks]
    if not checks or None in divisors:  # some step is not a Σ means ÷ D: name each step's
        return ", ".join(dict.fromkeys(c.divided_by for c in checks))
    each = ", ".join(dict.fromkeys(f"{d:.4g}" for d in divisors))
    if all(c.grad_error <= c.tolerance for c in checks):
        return f"Σ item losses ÷ window items (equal here: Σ means ÷ {each})"
    return f"Σ means ÷ {each}"


def _logged_as(value: float | None, terms: dict) -> str:
    if value is None:
        return ""
    candidates = {
        "window mean": terms["true"],
        "mean of micro-batch means": terms["mean_of_means"],
        "last micro-batch": terms["last"],
        "sum of micro-batch means": terms["sum_of_means"],
    }
    for name, target in candidates.items():
        if abs(value - target) <= LOSS_MATCH * abs(target):
            return name
    return "none of these"


@one_thread()  # tiny models: a second thread only waits (lesson 04's measurement)
def check_run(run: FrameworkRun) -> list[StepCheck]:
    """Every optimizer step of `run` against the reference at the same weights. Lesson 11."""
    instance("run", run, FrameworkRun, "a FrameworkRun al.frameworks.run_framework(...) returns")
    problem: Problem = run.problem
    expected = problem.windows()
    checks = []
    for i, step in enumerate(run.steps):
        checks.append(_check_step(problem, run, i, step, expected))
    return checks


def _check_step(problem: Problem, run: FrameworkRun, i: int, step: StepSeen, expected) -> StepCheck:
    if None in step.window:
        raise ValueError(f"step {i} of {run.framework} forwarded inputs that are not the problem's")
    terms = _window_terms(problem, step.params, step.window)
    used = flatten(step.grads).double()
    logged = run.logged_loss[i] if run.logged_loss and i < len(run.logged_loss) else None
    norms = run.logged_grad_norm
    return StepCheck(
        step=i,
        window=step.window,
        expected=expected[i] if i < len(expected) else None,
        grad_error=_rel(used, terms["g_ref"]),
        scale=float(used @ terms["g_ref"] / (terms["g_ref"] @ terms["g_ref"])),
        divided_by=_divided_by(used, terms, tolerance(problem)),
        pre_hook_error=_rel(flatten(step.grads_at_pre_hook).double(), used),
        lr=step.lr,
        expected_lr=problem.lr / (1 + i),  # the schedule lr × 1/(1 + step), one step per window
        true_loss=terms["true"],
        mean_of_means=terms["mean_of_means"],
        last_micro_loss=terms["last"],
        logged_loss=logged,
        logged_as=_logged_as(logged, terms),
        grad_norm=float(used.norm()),
        reference_norm=float(terms["g_ref"].norm()),
        logged_grad_norm=norms[i] if norms and i < len(norms) else None,
        tolerance=tolerance(problem),
        means_divisor=_means_divisor(used, terms, tolerance(problem)),
    )


def final_weight_error(run: FrameworkRun, reference: FrameworkRun) -> float:
    """‖final weights − the reference run's final weights‖ / ‖reference's‖ after the epoch."""
    for name, value in (("run", run), ("reference", reference)):
        instance(
            name, value, FrameworkRun, "a FrameworkRun al.frameworks.run_framework(...) returns"
        )
    if run.problem.data_name != reference.problem.data_name:
        raise ValueError(
            f"run and reference must be runs on the same problem, got {run.problem.data_name!r} "
            f"and {reference.problem.data_name!r}"
        )
    return _rel(flatten(run.final_params).double(), flatten(reference.final_params).double())


def _share(problem: Problem, params: dict, index: int, windows: list[tuple]) -> torch.Tensor:
    """Micro-batch `index`'s share of its window's reference gradient at `params`: the gradient
    of Σ its item losses ÷ the items in its window (one of `windows`), in float64."""
    problem = _in_float64(problem)
    window = next(w for w in windows if index in w)
    batches = problem.micro_batches()
    items = sum(problem.items(batches[i].y) for i in window)
    model = problem.model()
    model.load_state_dict(params, strict=True)
    (problem.sum_loss(model(batches[index].x), batches[index].y) / items).backward()
    return flatten(grads_of(model))


@one_thread()
def backward_shares(
    problem: Problem, calls: list[dict], windows: list[tuple] | None = None
) -> list[dict]:
    """Each logged backward call of an exercise run (accelerate_watch.accelerate_custom_loop) against
    the micro-batches forwarded so far: the one whose share of its window's reference gradient it
    added ({"micro_batch": i, "scale": 1.0, "error": ~0}), or, when none matches, the oldest one not
    yet matched with the factor the call added of its share (None when there is none).
    `windows`: the micro-batches of each window, in the order trained (default: the problem's;
    a shuffled loader trains others)."""
    windows = problem.windows() if windows is None else windows
    out, forwarded, matched = [], [], set()
    for call in calls:
        forwarded += [i for i in call["forwards"] if i is not None]
        added = call["added"].double()
        candidates = [i for i in forwarded if i not in matched]  # the oldest first
        best = None
        for i in dict.fromkeys(candidates):
            share = _share(problem, call["params"], i, windows)
            row = {
                "micro_batch": i,
                "scale": float(added @ share / (share @ share)),
                "error": _rel(added, share),
            }
            best = best or row
            if row["error"] <= EXACT_FLOAT32:
                best = row
                break
        if best is not None and best["error"] <= EXACT_FLOAT32:
            matched.add(best["micro_batch"])
        out.append(best or {"micro_batch": None, "scale": math.nan, "error": math.inf})
    return out
