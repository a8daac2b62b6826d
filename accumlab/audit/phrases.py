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
    "leftover_kept": (
        " Their gradient is still in .grad when the function returns (norm {norm:.3g}{scaled}), "
        "and {zeroed}."
    ),
    "first_window": "The first window held {size} micro-batch(es) and {weight}.",
    "warned": ", and PyTorch warned: “{warning}”",
}

# What the optimizer saw at a step, choice by choice (see hypotheses.py).
PARTS: dict[str, dict[str, str]] = {
    "zero": {
        "kept": "every micro-batch of the window",
        "carried": "the window's micro-batches plus the gradient left from earlier steps",
        "from": "only the last {kept} of the window's {n} micro-batches",
        "all": "a zero gradient",
    },
    "weights": {
        "items": "each weighted by its share of the window's items",
        "means": "each micro-batch's mean loss divided by {n}",
        "undivided": "each micro-batch's mean loss undivided",
        "summed": "each micro-batch's summed loss undivided",
        "items_k": "divided by k = {k} although the window holds {n}",
        "means_k": "each micro-batch's mean loss divided by k = {k} (the window holds {n})",
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
}


def phrase(name: str, **fields) -> str:
    return PHRASES[name].format(**fields)


def describe(how: dict[str, str], n: int, k: int) -> str:
    """'only the last 1 of the window's 4 micro-batches, each micro-batch's mean loss undivided'."""
    zero = how.get("zero", "kept")
    if zero == "all":
        return PARTS["zero"]["all"]
    kept = n - int(zero.split()[1]) if zero.startswith("from") else n
    words = [PARTS["zero"][zero.split()[0]].format(kept=kept, n=n)]
    words += [PARTS[part][how[part]].format(n=n, k=k) for part in ("weights", "scaler", "clip")]
    return ", ".join(w for w in words if w)
