"""Lesson 11 exercises: predict what a framework does to a short window, then make the Trainer and
Accelerate exact on token data — each answer is run through the REAL framework and every optimizer
step is compared with the reference."""

from __future__ import annotations

import math

from . import exercise
from ._answers import compare, numbers


def _worst(run) -> tuple[float, list]:
    from ..frameworks.measure import check_run

    checks = check_run(run)
    return max((c.grad_error for c in checks), default=math.inf), checks


@exercise("11.1", 1, "Lightning's short last window at another k")
def _lightning_factor(answer):
    # (optimizer steps, last step's gradient ÷ reference) for Lightning, regression, k = 6,
    # measured with the real Lightning; the lesson shows k = 2…5 only. Factor to 3 significant digits.
    from ..frameworks.measure import check_run
    from ..frameworks.runs import run_framework

    steps, factor = numbers(answer, 2)
    checks = check_run(run_framework("lightning", "regression", 6))
    if steps != len(checks):
        return "10 micro-batches in windows of 6: does Lightning step the remainder?"
    measured = checks[-1].scale
    return compare(
        factor,
        measured,
        sig=3,
        wrong={
            1.0: "Lightning does step the short window — but what does it divide its losses by?",
            1 / measured: "upside down: is the gradient too small or too large?",
        },
        otherwise="count the micro-batches in the last window, and what each loss is divided by",
    )


@exercise("11.2", 2, "a compute_loss_func that makes the Trainer exact on tokens")
def _trainer_loss(answer):
    from ..frameworks.runs import run_framework

    if not callable(answer):
        return "give a function loss(outputs, labels, num_items_in_batch=None) -> loss"
    run = run_framework("trainer", "tokens", 4, compute_loss_func=answer)
    worst, checks = _worst(run)
    if worst <= 1e-10:
        return None
    scales = [c.scale for c in checks]
    if all(s > 2 for s in scales[:2]):
        return (
            f"the steps are {scales[0]:.2g}× too large: the Trainer divides a compute_loss_func's "
            "loss by nothing — it is yours to normalise"
        )
    return (
        "the size is right but tokens are not weighed alike: divide the SUM by the window's count"
    )


@exercise("11.3", 3, "an Accelerate epoch that is exact on tokens, short window included")
def _accelerate_epoch(answer):
    from functools import partial

    from ..frameworks.runs import run_loop
    from ..frameworks.with_accelerate import accelerate_custom_loop

    if not callable(answer):
        return "give a function epoch(accelerator, model, optimizer, scheduler, loader, k)"
    run = run_loop(partial(accelerate_custom_loop, epoch_fn=answer), "tokens", 4)
    micro_batches = len(run.problem.micro_batches())
    calls = run.extra.get("backward_calls", 0)
    if calls != micro_batches:
        return (
            f"accelerator.backward ran {calls} times for {micro_batches} micro-batches: the "
            "exercise is about Accelerate's backward (and its ÷ k), once per micro-batch"
        )
    windows = run.problem.windows()
    if [s.window for s in run.steps] != windows:
        return (
            f"the optimizer stepped after micro-batches {[s.end for s in run.steps]}; "
            f"one big batch per window steps after {[w[-1] + 1 for w in windows]}"
        )
    worst, checks = _worst(run)
    if worst <= 1e-10:
        return None
    last = checks[-1]
    if all(c.grad_error <= 1e-10 for c in checks[:-1]):
        return f"only the short last window is off (×{last.scale:.3g}): backward still ÷ k there"
    return f"off by up to {worst:.0%}: accelerator.backward divides by k — count tokens per window"
