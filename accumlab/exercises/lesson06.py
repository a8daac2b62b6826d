"""Lesson 06 exercises: a real scheduler stepped per micro-batch, one GradScaler for two optimizers,
and a complete AMP + clipping + scheduler loop, observed."""

from __future__ import annotations

import math
from types import SimpleNamespace

from . import exercise
from ._amp_judge import OVERFLOW_06_3, judge_clip, judge_optimizer, judge_skip, judge_structure
from ._amp_loop import run_observed
from ._answers import Hint, compare

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
            # names the call counted, not the distance to the answer
            round(_cosine_fraction(calls + 1), 4): "that includes the scheduler call made "
            f"after {step}'s own optimizer.step(): the update has happened by then",
            0.0: "the schedule does not stop at its end: CosineAnnealingLR is periodic",
            0.5: f"count the scheduler's calls before {step}'s update, then place them "
            f"on a cosine of period {2 * T_MAX} calls",
            round(100 * expected, 2): "that looks like the right fraction written as a percent: "
            "answer with the fraction itself (0.25 for a quarter of the initial learning rate)",
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


def _reference_trace(model, batches, k, max_norm, make_scheduler, lr=0.1, overflow=()):
    """What 06.3 asks for, by `al.precision.amp_train`: the scheduler holds on a skipped step;
    `overflow` lists micro-batches whose loss is made inf (its gradient is then inf, as the
    checker's backward-only overflow makes it)."""
    import torch

    from ..data import Data
    from ..precision.amp import amp_train

    data = Data(torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches]))
    return amp_train(
        model, data, micro_batch_size=len(batches[0][0]), accumulation_steps=k,
        max_norm=max_norm, lr=lr, scheduler=make_scheduler, scheduler_on_skip="hold",
        overflow_micro_steps=tuple(overflow),
    )  # fmt: skip


def reference_train(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """What 06.3 asks for, built from `al.precision.amp_train` (the checker's reference)."""
    return _reference_trace(model, batches, k, max_norm, make_scheduler, lr).params[-1]


def _runs():
    """06.3's three runs: (max_norm, micro-batches made to overflow). Clipping active (every
    window's norm is above 0.05); a threshold no gradient reaches (clipping can hide a missing
    / k, since it caps the norm either way); and one micro-batch in window 1 whose backward the
    checker makes inf (its data, output and loss stay finite, as in a float16 overflow of the
    scaled backward)."""
    return ((0.05, ()), (100.0, ()), (0.05, (OVERFLOW_06_3,)))


@exercise("06.3", 3, "A loop combining AMP, clipping and a scheduler that holds on a skip")
def full_loop(answer) -> str | None:
    # answer(model, batches, k, max_norm, make_scheduler) -> trained model (CPU, bfloat16 autocast)
    import copy

    import torch

    if not callable(answer):
        raise Hint("answer with a function train(model, batches, k, max_norm, make_scheduler)")
    model, clean, sched = _train_setup()
    k = 4
    windows = len(clean) // k
    batches = clean  # run_observed hands the answer a copy: this list stays the checker's
    for max_norm, overflow in _runs():
        trained, counts, seen, grads, scale, sched_steps, dtypes = run_observed(
            answer, copy.deepcopy(model), batches, k, max_norm, sched, overflow
        )
        # the correct loop runs only now: while the answer runs, no frame holds its result
        ref = _reference_trace(model, clean, k, max_norm, sched, overflow=overflow)
        expected = ref.params[-1]
        if not isinstance(trained, torch.nn.Module):
            raise Hint("return the trained model")
        # every parametrised layer, in forwards with a graph (a no_grad log is free)
        off = sorted({f"{name} in {str(d)[6:]}" for name, d in dtypes if d != torch.bfloat16})
        if not dtypes or off:
            raise Hint(
                f"the forward ran {', '.join(off)}: run the whole forward under "
                "torch.autocast('cpu', dtype=torch.bfloat16)"
                if off
                else "no forward with a graph ran through the model's layers: run each "
                "micro-batch's forward under torch.autocast('cpu', dtype=torch.bfloat16)"
            )
        low = sorted(
            {str(p.dtype) for p in (*grads.params, *trained.parameters())} - {"torch.float32"}
        )
        if low:
            raise Hint(
                f"the parameters were {low}: keep them float32 and let autocast run the forward "
                "in bfloat16 (16-bit parameters get a 16-bit .grad, accumulated in 16 bits)"
            )
        judge_structure(seen, grads, scale, batches, k, overflow)
        pairs = [SimpleNamespace(x=x, y=y) for x, y in batches]
        # bfloat16 outputs round the received gradient: 2 % of the largest entry
        if seen.arrived.not_own(pairs, lambda out, mb: out.double() - mb.y.double(), rel=2e-2):
            raise Hint(
                "a micro-batch's forward did not receive its own loss's gradient at the model's "
                "output (the mean squared error of that micro-batch, scaled): each backward "
                "starts from that micro-batch's loss, through the forward it just ran"
            )
        for name in ("unscale_", "step", "update"):
            if counts[name] != windows:
                raise Hint(
                    f"your loop called scaler.{name} {counts[name]} times; {len(batches)} "
                    f"micro-batches in windows of {k} need {windows} (one per window)"
                )
        if overflow:
            judge_skip(trained, grads, scale, sched_steps, k, windows)
        elif len(grads.step_norms) != windows:
            raise Hint(
                f"an optimizer over the model's parameters stepped {len(grads.step_norms)} "
                f"times; train the model you were given, {windows} steps"
            )
        ends = grads.window_norms()[k - 1 :: k]  # .grad after each window's last backward
        if max_norm == 100.0 and min(e / s for e, s in zip(ends, grads.step_norms)) < 1e3:
            used = max(scale.backed_scales, default=1.0)
            raise Hint(
                f"your GradScaler's scale was {used:g}: build torch.amp.GradScaler('cpu') as "
                "asked (its scale starts at 65 536)"
                if 1.0 < used < 1e3
                else ".grad after the window's backward passes was no larger than the gradient "
                "the optimizer used: the losses were not scaled before backward"
            )
        judge_clip(grads, scale, max_norm, k, ref)
        if not overflow and sched_steps != windows:
            raise Hint(
                f"your scheduler stepped {sched_steps} times; once per optimizer step is {windows}"
            )
        judge_optimizer(grads)
        # the lr each step used, against the schedule's (the skipped window has no step)
        stepped = [lr for lr, s in zip(ref.lrs, ref.skipped, strict=True) if not s]
        lrs = ref.lrs if len(grads.step_lrs) == windows else stepped
        wrong = [j for j, (a, b) in enumerate(zip(grads.step_lrs, lrs)) if abs(a - b) > 1e-9 * b]
        ratios = [a / b for a, b in zip(grads.step_lrs, lrs) if b]
        if wrong and ratios and max(ratios) - min(ratios) <= 1e-9 * max(ratios):
            raise Hint(
                f"every optimizer step used {ratios[0]:.3g} × the schedule's lr: build SGD with "
                "lr=lr (the scheduler multiplies the lr it was built with)"
            )
        if wrong:
            j = wrong[0]
            raise Hint(
                f"optimizer step {j} used lr {grads.step_lrs[j]:.3g}; the schedule gives "
                f"{lrs[j]:.3g} there: step the scheduler after the optimizer step (the first "
                "window uses the schedule's first lr)"
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
                "loop moved them): check the optimizer (plain SGD at lr, nothing else set) and "
                # a clip that bites caps the norm either way: / k shows only where it does not
                f"the loss{' and its / k' if max_norm == 100.0 else ''}"
            )
        del ref, expected  # nor does the next run's frame hold this one's
    return None
