"""Lesson 06 exercises: schedules, the AMP call order, and a complete AMP + clipping + scheduler loop."""

from __future__ import annotations

import math

from . import exercise


@exercise("06.1", 1, "Warm-up measured in the wrong unit")
def warmup_length(answer) -> str | None:
    # k = 8, warm-up written for 400 optimizer steps, scheduler.step() after every micro-batch
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return "answer with a number of optimizer steps"
    if answer == 400:
        return "that is what the schedule was written for; count the scheduler's calls per optimizer step"
    if answer == 3200:
        return "the scheduler runs faster, not slower: how many calls happen per optimizer step?"
    if answer != 50:
        return "each optimizer step now advances the scheduler by k calls"
    return None


AMP_CALLS = ("zero_grad", "backward", "unscale_", "clip", "step", "update", "scheduler.step")


@exercise("06.2", 2, "One window of AMP in the right order")
def window_order(answer) -> str | None:
    # one window, k = 3: a list of the names in AMP_CALLS, in the order the loop calls them
    if not isinstance(answer, (list, tuple)) or not all(isinstance(a, str) for a in answer):
        return f"answer with a list of call names taken from {AMP_CALLS}"
    unknown = [a for a in answer if a not in AMP_CALLS]
    if unknown:
        return f"unknown call names {unknown}; use names from {AMP_CALLS}"
    calls = list(answer)
    if calls.count("zero_grad") != 1 or calls.index("zero_grad") not in (0, len(calls) - 1):
        return "zero the gradients exactly once per window, before its first or after its last call"
    calls.remove("zero_grad")
    if calls.count("backward") != 3:
        return "a window of k = 3 micro-batches has one backward per micro-batch"
    for name in AMP_CALLS[2:]:
        if calls.count(name) != 1:
            return f"{name!r} belongs exactly once per window"
    pos = {name: calls.index(name) for name in AMP_CALLS[2:]}
    last_backward = max(i for i, c in enumerate(calls) if c == "backward")
    if pos["unscale_"] < last_backward:
        return "unscale_ divides the whole .grad: which gradients would a later backward add?"
    if not pos["unscale_"] < pos["clip"] < pos["step"]:
        return "the threshold is meant for true gradients, and the step should see clipped ones"
    if pos["update"] < pos["step"]:
        return "update() decides the next scale from what step() found"
    if pos["scheduler.step"] < pos["step"]:
        return "the scheduler moves on after the optimizer has used the current learning rate"
    return None


def _train_setup():
    import torch

    from ..data import regression_data
    from ..models import mlp
    from ..precision.schedules import warmup_cosine

    data = regression_data(n=32, features=4, seed=3, dtype=torch.float32)
    model = mlp(features=4, hidden=16, depth=1, seed=3, dtype=torch.float32)
    batches = [(mb.x, mb.y) for mb in data.micro_batches(2)]
    return model, batches, warmup_cosine(2, 4)


def reference_train(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """What 06.3 asks for, built from `al.precision.amp_train` (the checker's reference)."""
    import torch

    from ..data import Data
    from ..precision.amp import amp_train

    data = Data(torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches]))
    trace = amp_train(
        model,
        data,
        micro_batch_size=len(batches[0][0]),
        accumulation_steps=k,
        max_norm=max_norm,
        lr=lr,
        scheduler=make_scheduler,
    )
    return trace.params[-1]


@exercise("06.3", 3, "A loop combining AMP, clipping and a scheduler")
def full_loop(answer) -> str | None:
    # answer(model, batches, k, max_norm, make_scheduler) -> trained model (CPU, bfloat16 autocast)
    import copy

    import torch

    if not callable(answer):
        return "answer with a function train(model, batches, k, max_norm, make_scheduler)"
    model, batches, sched = _train_setup()
    # twice: with clipping active, and with a threshold no gradient reaches (clipping can hide a
    # missing / k, since it caps the norm either way)
    for max_norm in (0.05, 100.0):
        expected = reference_train(model, batches, 4, max_norm, sched)
        trained = answer(copy.deepcopy(model), batches, 4, max_norm, sched)
        if not isinstance(trained, torch.nn.Module):
            return "return the trained model"
        got = dict(trained.named_parameters())
        start = {n: p.detach() for n, p in model.named_parameters()}
        moved = max(float((expected[n] - start[n]).abs().max()) for n in expected)
        gap = max(float((got[n].detach().float() - expected[n]).abs().max()) for n in expected)
        if not math.isfinite(gap):
            return "the parameters are not finite: is the scale removed before the optimizer steps?"
        if gap > 0.05 * moved:  # bf16 rounding differs with op order; wrong loops move far more
            return (
                f"with max_norm={max_norm} the parameters differ from a correct loop's: check "
                "loss / k, one unscale_ before clipping, and one scheduler step per optimizer step"
            )
    return None
