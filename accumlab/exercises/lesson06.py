"""Lesson 06 exercises: a real scheduler stepped per micro-batch, one GradScaler for two optimizers,
and a complete AMP + clipping + scheduler loop, observed."""

from __future__ import annotations

import math

from . import exercise
from ._answers import Hint, compare
from ._observe import Refuse, Spy

# 06.1: CosineAnnealingLR(T_max=400) built for 400 optimizer steps, k = 8, stepped per micro-batch
T_MAX, K_06_1, STEP_06_1 = 400, 8, 100


def _cosine_fraction(calls: int) -> float:
    """The lr fraction torch's CosineAnnealingLR(T_max) gives after `calls` calls (run, not a formula)."""
    import torch

    param = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([param], lr=1.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=T_MAX)
    for _ in range(calls):
        opt.step()
        sched.step()
    return float(opt.param_groups[0]["lr"])


@exercise("06.1", 1, "A cosine schedule stepped per micro-batch")
def cosine_per_micro_batch(answer) -> str | None:
    # before optimizer step j's update: k calls per earlier window, k - 1 in its own window
    expected = _cosine_fraction(STEP_06_1 * K_06_1 + K_06_1 - 1)
    as_written = _cosine_fraction(STEP_06_1)
    return compare(
        answer,
        expected,
        sig=2,
        wrong={
            round(as_written, 4): "that is what optimizer step 100 would use with one "
            "scheduler.step() per optimizer step; here the scheduler is called after every "
            "micro-batch",
            0.0: "the schedule does not stop at its end: CosineAnnealingLR is periodic",
            0.5: "count the scheduler's calls before optimizer step 100's update, then place them "
            f"on a cosine of period {2 * T_MAX} calls",
        },
        otherwise="count the calls scheduler.step() has received before optimizer step 100 "
        "updates the weights, and read the cosine there",
    )


G_NAMES = ("unscale_(g)", "clip(g)", "step(g)")
D_NAMES = ("unscale_(d)", "clip(d)", "step(d)")
CALLS_06_2 = ("zero_grad", "backward", *G_NAMES, *D_NAMES, "update", "scheduler.step")
K_06_2 = 2


@exercise("06.2", 2, "One GradScaler, two optimizers")
def two_optimizers(answer) -> str | None:
    # one window, k = 2: each name of CALLS_06_2 in the order the loop calls it
    if isinstance(answer, (str, bytes)) or not isinstance(answer, (list, tuple)):
        raise Hint(f"answer with a list of call names taken from {CALLS_06_2}")
    if not all(isinstance(a, str) for a in answer):
        raise Hint(f"every item should be a call name (a string) from {CALLS_06_2}")
    calls = list(answer)
    unknown = [a for a in calls if a not in CALLS_06_2]
    if unknown:
        raise Hint(f"unknown call names {unknown}; use names from {CALLS_06_2}")
    if calls.count("backward") != K_06_2:
        raise Hint(f"a window of k = {K_06_2} micro-batches has one backward per micro-batch")
    for name in (*G_NAMES, *D_NAMES, "zero_grad", "update", "scheduler.step"):
        if calls.count(name) != 1:
            raise Hint(f"{name!r} belongs exactly once per window, got {calls.count(name)}")
    at = {name: calls.index(name) for name in calls if name != "backward"}
    last_backward = max(i for i, c in enumerate(calls) if c == "backward")
    first_backward = calls.index("backward")
    for unscale, clip, step in (G_NAMES, D_NAMES):
        if at[unscale] < last_backward:
            raise Hint(
                f"{unscale} divides the whole .grad of its optimizer's parameters by the scale: "
                "which gradients would a later backward add, still scaled?"
            )
        if not at[unscale] < at[clip] < at[step]:
            raise Hint(
                f"for each optimizer: unscale_, then clip (the threshold is meant for true "
                f"gradients), then step (on clipped ones) — check {unscale}, {clip}, {step}"
            )
    if at["update"] < max(at["step(g)"], at["step(d)"]):
        raise Hint(
            "update() decides the next scale from the inf checks of every optimizer stepped this "
            "iteration: call it once, after all of them"
        )
    if at["scheduler.step"] < max(at["step(g)"], at["step(d)"]):
        raise Hint("the schedulers move on after their optimizers have used the current lr")
    zero = at["zero_grad"]
    if not (zero < first_backward or zero > max(at["step(g)"], at["step(d)"])):
        raise Hint(
            "zero the gradients before the window's first backward or after both optimizers have "
            "stepped: anywhere between, it throws away accumulated or unused gradients"
        )
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


def _calls(answer, model, batches, k, max_norm, make_scheduler):
    """Run the answer observed: the calls it made to GradScaler, clip_grad_norm_ and its scheduler,
    and the dtype the model's first layer produced."""
    import contextlib

    import torch

    scheduler_calls = []

    def counted_scheduler(opt):
        sched = make_scheduler(opt)
        step = sched.step

        def counted(*args, **kwargs):
            scheduler_calls.append(1)
            return step(*args, **kwargs)

        sched.step = counted
        return sched

    dtypes = []
    hook = model[0].register_forward_hook(lambda m, a, out: dtypes.append(out.dtype))
    spies = {
        name: Spy(torch.amp.GradScaler, name, f"scaler.{name}")
        for name in ("scale", "unscale_", "step", "update")
    }
    clip = Spy(torch.nn.utils, "clip_grad_norm_", "torch.nn.utils.clip_grad_norm_")
    try:
        with Refuse("al.precision.amp_train"), contextlib.ExitStack() as stack:
            for spy in (*spies.values(), clip):
                stack.enter_context(spy)
            trained = answer(model, batches, k, max_norm, counted_scheduler)
    finally:
        hook.remove()
    counts = {name: spy.calls for name, spy in spies.items()}
    return trained, counts, clip.calls, len(scheduler_calls), dtypes


@exercise("06.3", 3, "A loop combining AMP, clipping and a scheduler")
def full_loop(answer) -> str | None:
    # answer(model, batches, k, max_norm, make_scheduler) -> trained model (CPU, bfloat16 autocast)
    import copy

    import torch

    if not callable(answer):
        raise Hint("answer with a function train(model, batches, k, max_norm, make_scheduler)")
    model, batches, sched = _train_setup()
    k = 4
    windows = len(batches) // k
    # twice: with clipping active, and with a threshold no gradient reaches (clipping can hide a
    # missing / k, since it caps the norm either way)
    for max_norm in (0.05, 100.0):
        expected = reference_train(model, batches, k, max_norm, sched)
        trained, counts, clips, sched_steps, dtypes = _calls(
            answer, copy.deepcopy(model), batches, k, max_norm, sched
        )
        if not isinstance(trained, torch.nn.Module):
            raise Hint("return the trained model")
        if not dtypes or any(d != torch.bfloat16 for d in dtypes):
            raise Hint(
                f"the forward ran in {sorted({str(d) for d in dtypes}) or 'no dtype'}: run it "
                "under torch.autocast('cpu', dtype=torch.bfloat16)"
            )
        want = {"scale": len(batches), "unscale_": windows, "step": windows, "update": windows}
        for name, n in want.items():
            if counts[name] != n:
                raise Hint(
                    f"your loop called scaler.{name} {counts[name]} times; {len(batches)} "
                    f"micro-batches in windows of {k} need {n} ({'one per micro-batch' if name == 'scale' else 'one per window'})"
                )
        if clips != windows:
            raise Hint(
                f"your loop clipped {clips} times; clip once per window, after unscale_ "
                f"({windows} expected)"
            )
        if sched_steps != windows:
            raise Hint(
                f"your scheduler stepped {sched_steps} times; once per optimizer step is {windows}"
            )
        got = dict(trained.named_parameters())
        start = {n: p.detach() for n, p in model.named_parameters()}
        moved = max(float((expected[n] - start[n]).abs().max()) for n in expected)
        gap = max(float((got[n].detach().float() - expected[n]).abs().max()) for n in expected)
        if not math.isfinite(gap):
            raise Hint(
                "the parameters are not finite: is the scale removed before the optimizer steps?"
            )
        if gap > 0.05 * moved:  # bf16 rounding differs with op order; wrong loops move far more
            raise Hint(
                f"with max_norm={max_norm} the parameters differ from a correct loop's by "
                f"{gap:.2g} (allowed: 5 % of how far the correct loop moved them, {moved:.2g}): "
                "check loss / k, and unscale_ before clipping"
            )
    return None
