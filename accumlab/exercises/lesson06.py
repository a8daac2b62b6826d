"""Lesson 06 exercises: a real scheduler stepped per micro-batch, one GradScaler for two optimizers,
and a complete AMP + clipping + scheduler loop, observed."""

from __future__ import annotations

import math

from . import exercise
from ._amp_loop import GradWatch, ScalerWatch
from ._answers import Hint, compare
from ._observe import Observe, Refuse, Spy, forwards_phrase

# 06.1: CosineAnnealingLR(T_max=400) built for 400 optimizer steps, k = 8, stepped per micro-batch
T_MAX, K_06_1, STEP_06_1 = 400, 8, 30


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
    calls = STEP_06_1 * K_06_1 + K_06_1 - 1
    expected = _cosine_fraction(calls)
    step = f"optimizer step {STEP_06_1}"
    return compare(
        answer,
        expected,
        sig=3,
        wrong={
            round(_cosine_fraction(STEP_06_1), 4): f"that is what {step} would use with one "
            "scheduler.step() per optimizer step; here the scheduler is called after every "
            "micro-batch",
            1.0: f"the scheduler changes the learning rate: count its calls before {step}'s update",
            round(_cosine_fraction(STEP_06_1 * K_06_1), 4): f"that counts {STEP_06_1 * K_06_1} "
            f"calls, the earlier windows' only: within {step}'s own window the scheduler is called "
            "after micro-batches that come before the optimizer step",
            round(_cosine_fraction(calls + 1), 4): "one call too many: the call after "
            f"{step}'s own optimizer.step() comes after its update",
            0.0: "the schedule does not stop at its end: CosineAnnealingLR is periodic",
            0.5: f"count the scheduler's calls before {step}'s update, then place them "
            f"on a cosine of period {2 * T_MAX} calls",
        },
        otherwise=f"count the calls scheduler.step() has received before {step} "
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
    """Run the answer observed: its forwards and backward passes, what `.grad` held at each
    backward and at each step (GradWatch), the calls it made to GradScaler and its scheduler, and
    the dtype the model's first layer produced."""
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
        for name in ("unscale_", "step", "update")
    }
    refused = Refuse("al.precision.amp_train", "al.exercises.lesson06.reference_train")
    seen, grads, scale = Observe(model), GradWatch(model), ScalerWatch()
    try:
        with refused, seen, grads, scale, contextlib.ExitStack() as stack:
            for spy in spies.values():
                stack.enter_context(spy)
            trained = answer(model, batches, k, max_norm, counted_scheduler)
    finally:
        hook.remove()
    counts = {name: spy.calls for name, spy in spies.items()}
    return trained, counts, seen, grads, scale, len(scheduler_calls), dtypes


def _judge_structure(seen, grads, scale, batches, k):
    """The technique: one forward and one scaled backward per micro-batch, `.grad` zeroed once per
    window and left alone inside it."""
    rows = len(batches[0][0])
    if seen.backwards == 0:
        raise Hint(
            "no backward pass reached the model you were given (did your loop train a copy?): "
            "train that model in place and return it"
        )
    if seen.rows != [rows] * len(batches) or seen.backwards != len(batches):
        raise Hint(
            f"{seen.summary()}; accumulation runs {forwards_phrase([rows] * len(batches))} and "
            f"{len(batches)} backward passes, one per micro-batch"
        )
    if scale.disabled:
        raise Hint("your GradScaler is disabled (enabled=False): it must scale the losses")
    if scale.calls - scale.detached != len(batches):
        raise Hint(
            f"your loop scaled {scale.calls - scale.detached} losses that backward went through; "
            f"scale each micro-batch's loss, {len(batches)} in all"
        )
    for b, state in enumerate(grads.found):
        first = b % k == 0
        if first and state != "empty":
            raise Hint(
                f"when window {b // k}'s first backward began, .grad still held the previous "
                "window's gradient: zero it once per window"
            )
        if not first and state != "kept":
            raise Hint(
                f"between backward {b - 1} and {b} (inside window {b // k}) your loop "
                f"{'zeroed' if state == 'empty' else 'rescaled'} .grad: unscale_ and clip once, "
                "after the window's last backward"
            )


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
    # twice: with clipping active (every window's norm is above 0.05), and with a threshold no
    # gradient reaches (clipping can hide a missing / k, since it caps the norm either way)
    for max_norm in (0.05, 100.0):
        expected = reference_train(model, batches, k, max_norm, sched)
        trained, counts, seen, grads, scale, sched_steps, dtypes = _calls(
            answer, copy.deepcopy(model), batches, k, max_norm, sched
        )
        if not isinstance(trained, torch.nn.Module):
            raise Hint("return the trained model")
        if not dtypes or any(d != torch.bfloat16 for d in dtypes):
            raise Hint(
                f"the forward ran in {sorted({str(d) for d in dtypes}) or 'no dtype'}: run it "
                "under torch.autocast('cpu', dtype=torch.bfloat16)"
            )
        _judge_structure(seen, grads, scale, batches, k)
        for name in ("unscale_", "step", "update"):
            if counts[name] != windows:
                raise Hint(
                    f"your loop called scaler.{name} {counts[name]} times; {len(batches)} "
                    f"micro-batches in windows of {k} need {windows} (one per window)"
                )
        if len(grads.step_norms) != windows:
            raise Hint(
                f"an optimizer over the model's parameters stepped {len(grads.step_norms)} "
                f"times; train the model you were given, {windows} steps"
            )
        ends = grads.window_norms()[k - 1 :: k]  # .grad after each window's last backward
        if max_norm == 100.0 and min(e / s for e, s in zip(ends, grads.step_norms)) < 1e3:
            raise Hint(
                ".grad after the window's backward passes was no larger than the gradient the "
                "optimizer used: the losses were not scaled before backward"
            )
        over = [w for w, g in enumerate(grads.step_norms) if g > max_norm * (1 + 1e-3)]
        if over:
            raise Hint(
                f"in window {over[0]} the optimizer stepped on a gradient of norm "
                f"{grads.step_norms[over[0]]:.3g} > max_norm={max_norm}: clip once per window, "
                "after unscale_"
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
                f"{gap:.2g}; allowed: {0.05 * moved:.2g} (5 % of the {moved:.2g} the correct "
                "loop moved them): check loss / k, and unscale_ before clipping"
            )
    return None
