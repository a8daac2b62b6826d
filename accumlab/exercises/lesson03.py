"""Lesson 03 exercises: loss scaling with a short last window and variable token counts."""

from __future__ import annotations

import math

import torch

from . import exercise

TOY_TOKENS, TOY_MEANS = [30, 70], [2.0, 1.0]
RANK_TOKENS = [5, 15, 30, 50]


@exercise("03.1", 1, "the true mean loss of two uneven micro-batches")
def true_mean(answer):
    from ..scaling.tokens import combined_loss

    if not isinstance(answer, (int, float)) or isinstance(answer, bool):
        return "answer with one number: the mean loss over all 100 tokens"
    if math.isclose(answer, combined_loss(TOY_TOKENS, TOY_MEANS, "mean"), rel_tol=1e-9):
        return "that is the mean of the two means; each token should count once"
    if not math.isclose(answer, combined_loss(TOY_TOKENS, TOY_MEANS, "global"), rel_tol=1e-9):
        return "add up every token's loss (tokens × mean per micro-batch) and divide by all tokens"
    return None


@exercise("03.2", 2, "a Recipe that matches the full batch in every window, short one included")
def every_window_exact(answer):
    from ..data import regression_data
    from ..engine import Recipe
    from ..models import mlp
    from ..scaling.weights import window_errors

    if not isinstance(answer, Recipe):
        return "answer with an al.Recipe(...)"
    if (answer.micro_batch_size, answer.accumulation_steps) != (4, 3):
        return "keep micro_batch_size=4 and accumulation_steps=3; change only the policies"
    if answer.zero_grad != "window":
        return "zeroing before every micro-step erases the earlier micro-batches"
    checks = window_errors(answer, mlp(seed=0), regression_data(n=22, seed=0))
    if not all(c.kept for c in checks):
        return "a dropped window's samples never reach the optimizer: no gradient to match"
    if any(c.max_rel > 1e-12 for c in checks):
        bad = [c.window for c in checks if c.max_rel > 1e-12]
        return (
            f"window(s) {bad} differ from the full batch; compare "
            "al.scaling.effective_weights([1] * 22, your_recipe) with its .reference"
        )
    return None


@exercise("03.3", 2, "the divisor each data-parallel rank needs")
def rank_divisor(answer):
    total, ranks = sum(RANK_TOKENS), len(RANK_TOKENS)
    values = answer if isinstance(answer, (list, tuple)) else [answer] * ranks
    if len(values) != ranks or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v for v in values
    ):
        return "answer with one non-zero number (the same on every rank) or a list of four"
    if [float(v) for v in values] == [float(n) for n in RANK_TOKENS]:
        return "each rank's own count gives the mean of the rank means"
    if all(math.isclose(v, total, rel_tol=1e-12) for v in values):
        return (
            "right count, but DDP then AVERAGES the four gradients: account for that division too"
        )
    if not all(math.isclose(v, total / ranks, rel_tol=1e-12) for v in values):
        return "all-reduce the token count first; then remember what DDP does to the gradients"
    return None


def _token_batches(lengths: list[int], micro_batch_size: int, seed: int):
    from ..data import token_data

    data = token_data(lengths=lengths, vocab=12, seed=seed)
    return data, data.micro_batches(micro_batch_size)


@exercise("03.4", 3, "fix a token-level accumulation loop")
def fix_loop(answer):
    from ..compare import grad_diff
    from ..engine import grads_of
    from ..models import TinyLM
    from ..reference import full_batch_grads

    if not callable(answer):
        return "answer with a function accumulate(model, micro_batches)"
    for lengths, mb, seed in (([2, 9, 14, 3, 1, 11], 2, 0), ([20, 1, 4, 7, 6], 1, 1)):
        data, micro = _token_batches(lengths, mb, seed)
        model = TinyLM(vocab=12, dim=6, seed=seed)
        model.zero_grad(set_to_none=True)
        answer(model, micro)
        grads = grads_of(model)
        if all(float(g.abs().max()) == 0.0 for g in grads.values()):
            return "no gradient arrived: call .backward() on each micro-batch's loss"
        full = full_batch_grads(model, data, loss="cross_entropy")
        if grad_diff(grads, full).max_rel > 1e-10:
            scale = _ratio(grads, full)
            if scale is not None and not math.isclose(scale, 1.0, rel_tol=1e-9):
                return f"the direction is right but the size is {scale:.3g}× the full batch: check the divisor"
            return "micro-batches with few tokens weigh too much: every real token should weigh 1/N"
    return None


def _ratio(a: dict, b: dict) -> float | None:
    fa = torch.cat([a[n].reshape(-1) for n in sorted(a)])
    fb = torch.cat([b[n].reshape(-1) for n in sorted(b)])
    ratio = float(fa @ fb / (fb @ fb))
    return ratio if torch.allclose(fa, ratio * fb, rtol=1e-9, atol=1e-14) else None
