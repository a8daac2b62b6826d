"""The words of every finding, as data: a template per finding code, filled with measured values
(lesson 08). Detection lives in the detector modules; changing a sentence never touches them.

A template is a `str.format` string; a code with several situations maps variant names to
templates, and `message(code, variant, **fields)` picks one.
"""

from __future__ import annotations

MESSAGES: dict[str, str | dict[str, str]] = {
    "RUNAWAY_LOOP": (
        "Your function ran more than {limit} forward passes for {micro_batches} micro-batches, "
        "so the audit stopped it: does the loop end?"
    ),
    "UNSCALE_MISUSE": {
        "raised": (
            "scaler.unscale_(optimizer) was called again before scaler.update(), which PyTorch "
            "refuses ({error}). Call unscale_ once per optimizer step: after the window's last "
            "backward, right before clipping and scaler.step."
        ),
        "clip_before_unscale": (
            "clip_grad_norm_ ran on gradients still multiplied by the GradScaler's scale "
            "({scale:g}), so it clipped to max_norm / scale = {threshold:.3g} instead of "
            "{max_norm}: the optimizer saw a gradient of norm {norm:.3g}. Call "
            "scaler.unscale_(optimizer) once, right before clipping."
        ),
    },
    "SCALER_MISUSE": (
        "{where}() raised {error}. The order per window is: scaler.scale(loss).backward() for "
        "every micro-batch, then unscale_, clip, scaler.step, scaler.update once."
    ),
    "STEP_RAISED": "Your function raised {error}{where}. Nothing after that could be audited.",
    "MODEL_CHANGED": (
        "After your function ran, the model's parameters no longer have the same names and shapes "
        "({changes}). A training loop updates values, it does not replace layers: the audit "
        "cannot compare gradients."
    ),
    "NO_STEPS": {
        "no_forward": (
            "Your function never ran the model on the micro-batches it was given, so nothing was "
            "trained."
        ),
        "no_step": (
            "Your function ran {forwards} forward passes but never called optimizer.step() on the "
            "optimizer it was given (did it build its own?), so nothing was trained."
        ),
    },
    "STEP_EVERY_MICRO_BATCH": (
        "optimizer.step() ran after every micro-batch: {seen} steps for {micro_batches} "
        "micro-batches instead of {expected}, so nothing was accumulated. Step only when a window "
        "of k = {k} micro-batches (or the epoch) is complete."
    ),
    "LAST_WINDOW_DROPPED": {
        "forwarded": (
            "The last window ({size} micro-batch(es), {samples} samples) never reaches the "
            "optimizer: their gradients were computed, then never used by an optimizer step. Step "
            "once more when the epoch ends inside a window."
        ),
        "not_forwarded": (
            "The last window ({size} micro-batch(es), {samples} samples) never reaches the "
            "optimizer: they were never forwarded. Step once more when the epoch ends inside a "
            "window."
        ),
    },
    "OFF_BY_ONE_SCHEDULE": (
        "The first optimizer step came after {first} micro-batch(es) instead of k = {k}, so every "
        "window is shifted and the first one is the wrong size. With a 0-based counter i, step "
        "when (i + 1) % k == 0 (or at the epoch's last micro-batch)."
    ),
    "UNEXPLAINED_SCHEDULE": (
        "The optimizer stepped after a pattern of micro-batches the audit does not recognise "
        "(seen {seen}, reference {expected}); the micro-batches forwarded between steps were "
        "{windows}."
    ),
    "UNEXPLAINED_GRADIENT": (
        "At {count} of {compared} compared optimizer steps the gradient the optimizer saw differs "
        "from the reference, and none of the known bugs reproduces it. First at step {step}: "
        "{diff}.{why}"
    ),
    "LOSS_NOT_DIVIDED": (
        "Each micro-batch's loss reaches backward undivided, so the optimizer sees the sum of the "
        "window's gradients: {ratio:.3g}× the reference at step {step} (a window of {size}). "
        "Divide each loss by the number of micro-batches in its window."
    ),
    "ZERO_GRAD_IN_WINDOW": (
        "Gradients are zeroed inside the window, so the micro-batches before it are erased: at "
        "step {step} the optimizer saw {ratio:.3g}× the reference's size, pointing elsewhere "
        "(cosine {cosine:.4f}). Zero once per window, right after optimizer.step()."
    ),
    "GRADS_NEVER_ZEROED": (
        "Gradients are not zeroed after optimizer.step(), so step {step} also carries every "
        "earlier window's gradient ({ratio:.3g}× the reference's size). Call "
        "optimizer.zero_grad() after every optimizer.step()."
    ),
    "MEAN_OF_MEANS": (
        "Each micro-batch's loss is averaged over its own items, then the window averages those "
        "means, so an item in a small micro-batch weighs more than one in a big one (items per "
        "micro-batch at step {step}: {counts}; gradient off by {rel_l2:.3g} relative). Sum the "
        "item losses and divide by the window's total number of items."
    ),
    "LAST_WINDOW_UNDERWEIGHTED": (
        "The last window holds {size} micro-batch(es) but its loss is divided by k = {k}, so its "
        "samples weigh {ratio:.3g}× what the others weigh. Divide by the number of micro-batches "
        "actually in the window."
    ),
    "CLIP_PER_MICRO_BATCH": (
        "Gradients were clipped inside the window, on partial sums, instead of once after the last "
        "backward: at step {step} the optimizer saw a gradient of norm {norm:.4g} pointing off the "
        "reference (cosine {cosine:.4f}, max_norm = {max_norm}). Clip once, right before "
        "optimizer.step()."
    ),
    "NOT_CLIPPED": (
        "The audit asked for max_norm = {max_norm}, but the optimizer saw a gradient of norm "
        "{norm:.4g} at step {step}: it was never clipped. Clip once per window, right before "
        "optimizer.step()."
    ),
    "SCHEDULER_PER_MICRO_BATCH": (
        "scheduler.step() ran {calls} times for {steps} optimizer steps — once per micro-batch, so "
        "the schedule runs {rate:.3g}× too fast: the learning rate at step {step} was {seen:.4g} "
        "instead of {expected:.4g}. Step the scheduler once, right after each optimizer.step()."
    ),
    "SCHEDULER_STEPS_WRONG": (
        "scheduler.step() ran {calls} times for {steps} optimizer steps — not once per optimizer "
        "step: the learning rate at step {step} was {seen:.4g} instead of {expected:.4g}. Step the "
        "scheduler once, right after each optimizer.step()."
    ),
    "BATCHNORM_STATS": (
        "The model has BatchNorm in training mode: each micro-batch is normalised with its own "
        "mean and variance, so even a correct loop cannot reproduce the big batch's gradient "
        "(relative difference {rel_l2:.3g} at step {step}), and the running statistics were "
        "updated {updates} times before the first optimizer step, leaving the old statistics a "
        "weight of (1 − {momentum})^{updates} = {kept:.3g} instead of {one:.3g}. Lesson 04 shows "
        "the remedies (GroupNorm/LayerNorm, frozen BN)."
    ),
}

# Phrases several templates share.
PHRASES: dict[str, str] = {
    "dropout": (
        " The model has active Dropout: its random masks differ between your run and the "
        "reference, so audit with dropout switched off."
    ),
}


def message(code: str, variant: str | None = None, /, **fields) -> str:
    """The sentence for finding `code` (one of its variants), filled with the measured `fields`."""
    template = MESSAGES[code]
    if isinstance(template, dict):
        template = template[variant]
    return template.format(**fields)
