"""Judging what `_amp_loop` watched an AMP training loop do (exercise 06.3): the structure of
accumulation (forwards, backwards, graphs alive, `.grad` zeroed once per window) and, in the run
with an overflowing micro-batch, the skipped window and the scheduler held on it."""

from __future__ import annotations

import math

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
    graph_rows = [c.rows for c in seen.forwards if c.graph]  # a no_grad forward (a log) is free
    if graph_rows != [rows] * len(batches) or seen.backwards != len(batches):
        raise Hint(
            f"your answer ran {forwards_phrase(graph_rows)} with a graph and "
            f"{seen.backwards_phrase()}; accumulation runs {forwards_phrase([rows] * len(batches))}"
            f" and {len(batches)} backward passes, one per micro-batch"
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
            "the loop and keep it, so that its scale carries from window to window (after a "
            "skipped step update() lowers it)"
        )
    if scale.reached != len(batches):  # a scaled loss only logged (.item()) is not counted
        raise Hint(
            f"your loop scaled {scale.reached} losses that backward went through; "
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


def judge_skip(trained, grads, scale, sched_steps, k, windows):
    """The overflow run: window `OVERFLOW_06_3 // k` must move nothing, the scale must drop after
    it, and the scheduler hold."""
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
    scales = scale.backed_scales  # one per micro-batch (judge_structure counted them)
    # one scaler reset every window (update(65536.0), load_state_dict) is a fresh one: judge the
    # scale itself, which update() must lower after the skipped window (the weights show it was)
    if scales[(w + 1) * k] >= scales[w * k]:
        raise Hint(
            f"{where}, and scaler.step skipped that window, yet window {w + 1} scaled its losses by "
            f"{scales[(w + 1) * k]:g}, window {w}'s scale was {scales[w * k]:g}: let update() "
            "lower the scale and keep it (one GradScaler, never reset), so that it carries from "
            "window to window"
        )
    # every later window too: the scale a GradScaler kept from the start gives, replayed with the
    # answer's own settings (a reset after each good window, or every other one, passed the above)
    kept = scale.scalers[0] if scale.scalers else None
    if kept is not None:
        replay, tracker = float(kept._init_scale), 0
        for window in range(windows):
            used = scales[window * k]
            if used != replay:
                raise Hint(
                    f"{where}; window {window} scaled its losses by {used:g}, where one "
                    f"GradScaler kept from the start (your settings) would scale by {replay:g}: "
                    "let update() change the scale, and never reset it"
                )
            if window == w:
                replay, tracker = replay * kept._backoff_factor, 0
            else:
                tracker += 1
                if tracker == kept._growth_interval:
                    replay, tracker = replay * kept._growth_factor, 0
    if sched_steps != windows - 1:
        raise Hint(
            f"{where}: GradScaler skipped that window's step, and your scheduler stepped "
            f"{sched_steps} times in {windows} windows. Hold it on a skipped step ({windows - 1} "
            "steps): how can your loop tell that scaler.step skipped? (watch the scale)"
        )


def judge_clip(grads, scale, max_norm, k, ref):
    """Clipped once per window after unscale_, to max_norm itself: the optimizer never steps on a
    norm above it, and where every window's gradient is above it (the reference's pre-clip norms
    say so, and the answer's own: .grad after the window's backwards over the scale they used) it
    steps on max_norm to rounding, so a clip to 0.95 x max_norm, or in another norm
    (norm_type=1), shows."""
    steps = [g for g in grads.step_norms if math.isfinite(g)]
    over = [w for w, g in enumerate(grads.step_norms) if math.isfinite(g) and g > max_norm * 1.001]
    if over:
        raise Hint(
            f"in window {over[0]} the optimizer stepped on a gradient of norm "
            f"{grads.step_norms[over[0]]:.3g} > max_norm={max_norm}: clip once per window, "
            "after unscale_"
        )
    norms = [n for n in ref.clip_norms if math.isfinite(n)]
    if not (norms and steps and min(norms) > max_norm):
        return
    if max(steps) < max_norm / 100:
        raise Hint(
            f"the optimizer stepped on gradients of norm {max(steps):.2g} at most, far below "
            f"max_norm={max_norm} although every window's gradient is above it: clipping met "
            "the scaled gradients. Unscale_ first, then clip"
        )
    ends = grads.window_norms()[k - 1 :: k]
    own = [e / c for e, c in zip(ends, scale.backed_scales[::k]) if math.isfinite(e / c)]
    low, high = min(steps), max(steps)
    if own and min(own) > max_norm * (1 + 1e-3) and low < max_norm * (1 - 1e-3):
        said = (
            f"norm {low:.3g}: your loop clipped to {low:.3g}, not to max_norm"
            if high - low <= 1e-3 * high
            else f"norms from {low:.3g} to {high:.3g} (L2), not max_norm: your loop clipped in "
            "another norm, or to another threshold"
        )
        raise Hint(
            f"every window's gradient is above max_norm={max_norm}, yet the optimizer stepped on "
            f"gradients of {said}. Clip with clip_grad_norm_(model.parameters(), max_norm), its "
            "default L2 norm"
        )


PLAIN_SGD = {"momentum": 0, "dampening": 0, "weight_decay": 0, "nesterov": False}


def judge_optimizer(watch) -> None:
    """Plain SGD, as asked: a little momentum or weight decay moves the weights by less than the
    bfloat16 tolerance of the final comparison, so it is read from the optimizer itself, at every
    step it took."""
    import torch

    for opt in watch.optimizers:
        if type(opt) is not torch.optim.SGD:
            raise Hint(
                f"the optimizer was {type(opt).__name__}: build torch.optim.SGD(model.parameters(), "
                "lr=lr), nothing else set"
            )
    for groups in watch.step_settings:
        for group in groups:
            extra = {key: group[key] for key, plain in PLAIN_SGD.items() if group[key] != plain}
            if extra:
                raise Hint(f"the SGD stepped with {extra}: plain SGD at lr, nothing else set")
