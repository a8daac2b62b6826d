"""Pieces of text several findings share, as data (lesson 08): sentences appended to a finding,
and the words that describe, choice by choice, what a step's gradient was made of."""

from __future__ import annotations

PHRASES: dict[str, str] = {
    "dropout": (
        " The model has active Dropout: its random masks differ between your run and the "
        "reference, so audit with dropout switched off."
    ),
    "modified": " Your loop changed its micro-batches in place (see BATCH_MODIFIED).",
    "seen": (
        " At step {step} the optimizer saw {description}: ‖seen‖ / ‖reference‖ = {ratio:.3g}, "
        "cosine {cosine:.4f}."
    ),
    "together": " Together with {others} at the same step(s).",
    "saturated": (
        " Clipping was active at step(s) {steps}: the scale was told apart only through "
        "clip_grad_norm_'s 1e-6 epsilon; audit with max_norm above {suggest:.3g} to see it "
        "directly."
    ),
    "leftover": (
        " Micro-batch(es) {batches} were forwarded after the last optimizer step and never used "
        "by one; their gradient is still in .grad (norm {norm:.3g}) when the function returns."
    ),
    "tail_left": (
        " The last epoch's tail is still in .grad when the run ends (norm {norm:.3g}{scaled})."
    ),
    "carried_over": (
        " From the second epoch on, the first window also held the micro-batch(es) forwarded "
        "after the previous epoch's last step: their gradient was still in .grad when the epoch "
        "began, and nothing zeroed it before step(s) {steps}."
    ),
    "first_window": "The first window held {size} micro-batch(es) and {weight}.",
    "warned": ", and PyTorch warned: “{warning}”",
    "warned_skip": (
        " The scheduler stepped at the skipped steps too, as in PyTorch's own recipe, and PyTorch "
        "warned: “{warning}”."
    ),
    # what an unexplained difference looks like (unexplained.py)
    "same_direction": (
        " Same direction, wrong scale: at every one of these steps the gradient points where the "
        "reference's does (cosine ≥ {cosine:.9f}) and only its length differs (‖seen‖ / "
        "‖reference‖ = {ratios}), so every item of a window got the same weight but the weights "
        "do not add up to 1. Look at your normaliser, the number each loss is divided by"
    ),
    "clipping_epsilon": (
        " Clipping bit at every one of these steps: the gradient points where the reference's "
        "does and has its length, max_norm = {max_norm:g}, to within {rel:.2g} relative, the size "
        "of clip_grad_norm_'s 1e-6 epsilon (clip_grad_norm_ multiplies by max_norm / (norm + "
        "1e-6)). Clipping computed another way gives this: by hand (max_norm / norm), or with "
        "clip_grad_norm_ on still-scaled gradients and max_norm × scale. The loss's scale is "
        "hidden by the clipping: audit with max_norm above the gradient's norm to check it"
    ),
    "constant_factor": (
        ": the same factor {factor:.4g} at every step, a constant multiplying the loss"
    ),
    "counts_padding": (
        ": it counts the padding positions too (each ratio is the window's real tokens / all "
        "its positions: {fractions}); divide by the real tokens, (y != -100).sum()"
    ),
    "rounding": (
        " The difference is small (at most {rel:.2g} relative) and the direction nearly the same "
        "(cosine ≥ {cosine:.6f}): what rounding does when your loop computes in a lower precision "
        "than the model's {dtype} (torch.autocast, a half-precision copy). If it does, audit with "
        "a tolerance above the rounding, such as rtol={suggest:g}; a bug that moves the gradient "
        "by less than that would then pass unseen."
    ),
}

# What the optimizer saw at a step, choice by choice (see hypotheses.py).
PARTS: dict[str, dict[str, str]] = {
    "zero": {
        "kept": "every micro-batch of the window",
        "carried": "the window's micro-batches plus the gradient left from earlier steps",
        "from": "only the last {kept} of the window's {n} micro-batches",
        "epoch": (
            "only the last {kept} of the window's {n} micro-batches (the {gone} forwarded in the "
            "previous epoch were zeroed when this one began)"
        ),
        "all": "a zero gradient",
    },
    "weights": {
        "items": "each weighted by its share of the window's items",
        "means": "each micro-batch's mean loss divided by {n}",
        "undivided": "each micro-batch's mean loss undivided",
        "summed": "each micro-batch's summed loss undivided",
        "items_k": "divided by k = {k} although the window holds {n}",
        "means_k": "each micro-batch's mean loss divided by k = {k} (the window holds {n})",
        "twice": "divided by the window's size {n} twice",
        "twice_k": "divided by k = {k} twice",
        "parts": "each part weighted as a window of its own",
    },
    "scaler": {"calls in order": "", "replayed": "rescaled by the GradScaler calls in the window"},
    "clip": {
        "window": "clipped once",
        "none": "",
        "micro": "clipped after every backward",
        "scaled": "clipped before unscale_",
    },
}

# How a window's loss was weighed, for windows the reference does not have (a shifted schedule).
WEIGHT_WORDS: dict[str, str] = {
    "items": "was averaged over its micro-batches, so it weighs as much as a full window",
    "means": "was averaged over its micro-batches, so it weighs as much as a full window",
    "undivided": "was not divided at all",
    "summed": "was not divided at all",
    "items_k": "was divided by k = {k}, so it weighs {n}/{k} of a full window",
    "means_k": "was divided by k = {k}, so it weighs {n}/{k} of a full window",
    "twice": "was divided by its size twice, so it weighs 1/{n} of a full window",
    "twice_k": "was divided by k = {k} twice, so it weighs {n}/{k}² of a full window",
    "parts": "was weighted part by part, each part as a window of its own",
}


def phrase(name: str, **fields) -> str:
    return PHRASES[name].format(**fields)


def describe(how: dict[str, str], n: int, k: int) -> str:
    """'only the last 1 of the window's 4 micro-batches, each micro-batch's mean loss undivided'."""
    zero = how.get("zero", "kept")
    if zero == "all":
        return PARTS["zero"]["all"]
    gone = int(zero.split()[1]) if zero.startswith(("from", "epoch")) else 0
    words = [PARTS["zero"][zero.split()[0]].format(kept=n - gone, n=n, gone=gone)]
    words += [PARTS[part][how[part]].format(n=n, k=k) for part in ("weights", "scaler", "clip")]
    return ", ".join(w for w in words if w)
