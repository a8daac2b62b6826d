"""Judging what `_amp_loop` watched an AMP training loop do (exercise 06.3): the structure of
accumulation (forwards, backwards, graphs alive, `.grad` zeroed once per window) and, in the run
with an overflowing micro-batch, the skipped window and the scheduler held on it."""

from __future__ import annotations

from ._answers import Hint
from ._observe import forwards_phrase

# 06.3's third run: this micro-batch's output is made inf, so its gradient is too (window 1 of 4)
OVERFLOW_06_3 = 5


def judge_structure(seen, grads, scale, batches, k, overflow):
    """The technique: one forward and one scaled backward per micro-batch, one graph alive at a
    time, `.grad` zeroed once per window and left alone inside it."""
    rows = len(batches[0][0])
    if seen.backwards == 0 and seen.grad_only:
        raise Hint(
            f"your loop took its gradients with torch.autograd.grad ({seen.grad_only} calls): "
            "this exercise asks for scaler.scale(loss).backward() on each micro-batch, so that "
            "backward adds each micro-batch's gradient into .grad"
        )
    if seen.backwards == 0:
        raise Hint(
            "no backward pass reached the model you were given (did your loop train a copy?): "
            "train that model in place and return it"
        )
    if overflow and seen.backwards == len(batches) - 1:
        raise Hint(
            f"micro-batch {OVERFLOW_06_3}'s loss is inf and your loop left out its backward: the "
            f"rest of window {OVERFLOW_06_3 // k} is then a different batch. Backward it like the "
            "others and let scaler.step skip the whole window"
        )
    if seen.rows != [rows] * len(batches) or seen.backwards != len(batches):
        raise Hint(
            f"{seen.summary()}; accumulation runs {forwards_phrase([rows] * len(batches))} and "
            f"{len(batches)} backward passes, one per micro-batch"
        )
    if seen.peak_graphs > 1:
        raise Hint(
            f"{seen.summary()}: your loop kept several micro-batches' graphs alive, as a whole "
            "window's forward would. Run each micro-batch's backward right after its forward"
        )
    if scale.disabled:
        raise Hint("your GradScaler is disabled (enabled=False): it must scale the losses")
    if len(scale.scalers) > 1:  # its scale must carry: update() halves it after an overflow
        raise Hint(
            f"your loop scaled its losses with {len(scale.scalers)} GradScalers: build one before "
            "the loop, so that its scale carries from window to window (after a skipped step "
            "update() lowers it; a fresh GradScaler starts again at 65 536, however often that "
            "scale overflowed)"
        )
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


def judge_skip(trained, grads, sched_steps, k, windows):
    """The overflow run: window `OVERFLOW_06_3 // k` must move nothing, and the scheduler hold."""
    import torch

    w = OVERFLOW_06_3 // k
    where = f"micro-batch {OVERFLOW_06_3} (in window {w}) overflows (its backward is inf)"
    if not all(bool(torch.isfinite(p).all()) for p in trained.parameters()):
        raise Hint(
            f"{where}, and your weights ended inf/NaN: only scaler.step(optimizer) skips a window "
            "whose gradient holds an inf or NaN"
        )
    start, end = grads.weights[w * k], grads.weights[(w + 1) * k]
    if not all(torch.equal(a, b) for a, b in zip(start, end, strict=True)):
        raise Hint(
            f"{where}, yet your weights changed during window {w}: GradScaler skips the whole "
            "window, its good micro-batches included (a partial window is another batch)"
        )
    if sched_steps != windows - 1:
        raise Hint(
            f"{where}: GradScaler skipped that window's step, and your scheduler stepped "
            f"{sched_steps} times in {windows} windows. Hold it on a skipped step ({windows - 1} "
            "steps): how can your loop tell that scaler.step skipped? (watch the scale)"
        )
