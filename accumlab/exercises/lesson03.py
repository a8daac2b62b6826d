"""Lesson 03 exercises: loss scaling with a short last window and variable token counts."""

from __future__ import annotations

import torch

from . import exercise
from ._answers import Hint, compare
from ._observe import Observe, Refuse, forwards_phrase, plural

TOY_TOKENS, TOY_MEANS = [30, 70], [2.0, 1.0]  # 03.1: the lesson's toy had 10 and 90, 1.0 and 2.0
SAMPLES, K = 22, 3  # 03.2
RANK_TOKENS = [[30, 10], [45, 15]]  # 03.3: real tokens per micro-batch, per rank (k = 2)
EXACT = 1e-12  # float64 round-off: "exactly the full-batch gradient"
# 03.4: what the answer must write itself, not take from accumlab
REFUSED = (
    "al.full_batch_grads",
    "al.accumulated_grads",
    "al.run",
    "al.scaling.weighted_grads",
    "al.scaling.simulated_ranks_grads",
)


@exercise("03.1", 1, "the true mean loss of two uneven micro-batches")
def true_mean(answer):
    from ..scaling.tokens import combined_loss

    tokens = sum(TOY_TOKENS)
    return compare(
        answer,
        combined_loss(TOY_TOKENS, TOY_MEANS, "global"),
        sig=3,
        wrong={
            combined_loss(TOY_TOKENS, TOY_MEANS, "mean"): (
                "that is the mean of the two means; each token should count once"
            ),
            sum(n * m for n, m in zip(TOY_TOKENS, TOY_MEANS, strict=True)): (
                f"that is the summed loss of all tokens: divide it by the {tokens} tokens"
            ),
            sum(n * m for n, m in zip(TOY_TOKENS, reversed(TOY_MEANS), strict=True)) / tokens: (
                "each micro-batch's tokens carry that micro-batch's own mean: "
                f"{TOY_TOKENS[0]} tokens at {TOY_MEANS[0]}, {TOY_TOKENS[1]} at {TOY_MEANS[1]}"
            ),
        },
        otherwise="add up every token's loss (tokens × mean per micro-batch), divide by all tokens",
    )


@exercise("03.2", 2, "a micro-batch size and a policy that make a mean loss exact in every window")
def mean_made_exact(answer):
    from ..data import regression_data
    from ..engine import Recipe
    from ..models import mlp
    from ..scaling.weights import window_errors

    if not isinstance(answer, Recipe):
        return "answer with an al.Recipe(micro_batch_size, 3, 'mean', last_window)"
    if answer.accumulation_steps != K:
        return (
            f"keep accumulation_steps={K}; choose the micro-batch size and the last-window policy"
        )
    if answer.normalization != "mean":
        return (
            "your loss function returns each micro-batch's mean: keep normalization='mean' "
            "(the global count needs a loss that returns sums)"
        )
    if answer.zero_grad != "window" or answer.clip_norm is not None:
        return "zero once per window and leave clipping off: only the size and the policy change"
    mb = int(answer.micro_batch_size)
    if mb >= SAMPLES:
        return (
            f"micro-batches of {mb} hold all {SAMPLES} samples at once: nothing is accumulated; "
            "pick a size that splits them"
        )
    checks = window_errors(answer, mlp(seed=0), regression_data(n=SAMPLES, seed=0))
    if not all(c.kept for c in checks):
        return "'drop' skips the short window: its samples never reach the optimizer this epoch"
    wrong = [c.window for c in checks if c.max_rel > EXACT]
    if not wrong:
        return None
    if SAMPLES % mb:
        return (
            f"with micro-batches of {mb} the last one holds only {SAMPLES % mb} sample(s): dividing "
            "its mean like the others' weighs each of its samples more"
        )
    return (
        f"window(s) {wrong} hold fewer than {K} micro-batches but are still divided by {K}: "
        "choose the policy that divides by the micro-batches really there"
    )


@exercise("03.3", 2, "the divisor a data-parallel rank needs inside an accumulation window")
def rank_divisor(answer):
    ranks, mine = len(RANK_TOKENS), RANK_TOKENS[1][1]
    total = sum(map(sum, RANK_TOKENS))
    return compare(
        answer,
        total / ranks,
        sig=3,
        wrong={
            mine: "that is this micro-batch's own count: every token of the step must weigh "
            "the same, whichever micro-batch and rank holds it",
            sum(RANK_TOKENS[1]): "that is rank 1's own window: each rank dividing by its own "
            "count gives the mean of the rank means",
            float(total): "right count, but DDP then AVERAGES the two ranks' gradients: account "
            "for that division too",
            sum(RANK_TOKENS[1]) / ranks: "count the window's tokens on every rank (an all-reduce), "
            "not only on rank 1",
        },
        otherwise="count the real tokens of the whole window on every rank, then remember what "
        "DDP does to the gradients",
    )


def _token_batches(lengths: list[int], micro_batch_size: int, seed: int):
    from ..data import token_data

    data = token_data(lengths=lengths, vocab=12, seed=seed)
    return data, data.micro_batches(micro_batch_size)


@exercise("03.4", 3, "fix a token-level accumulation loop")
def fix_loop(answer):
    from ..compare import flatten, grad_diff
    from ..engine import grads_of
    from ..models import TinyLM
    from ..reference import full_batch_grads

    if not callable(answer):
        return "answer with a function accumulate(model, micro_batches)"
    for lengths, mb, seed in (([2, 9, 14, 3, 1, 11], 2, 0), ([20, 1, 4, 7, 6], 1, 1)):
        data, micro = _token_batches(lengths, mb, seed)
        model = TinyLM(vocab=12, dim=6, seed=seed)
        model.zero_grad(set_to_none=True)
        with Refuse(*REFUSED), Observe(model) as seen:
            answer(model, micro)
        rows = [c.rows for c in seen.forwards if c.graph]  # forwards under no_grad cost nothing
        expected = [len(m) for m in micro]
        if rows != expected:
            raise Hint(
                f"your answer ran {forwards_phrase(rows)} with a graph; accumulation runs "
                f"{forwards_phrase(expected)}, one per micro-batch"
            )
        if seen.backwards != len(micro) or seen.peak_graphs > 1:
            raise Hint(
                f"{seen.summary()}: call backward once per micro-batch, so each graph is freed "
                f"before the next forward ({plural(len(micro), 'backward pass', 'backward passes')})"
            )
        grads = grads_of(model)
        full = full_batch_grads(model, data, loss="cross_entropy")
        if grad_diff(grads, full).max_rel <= 1e-10:
            continue
        got, want = flatten(grads), flatten(full)
        scale = float(got @ want / (want @ want))
        if torch.allclose(got, scale * want, rtol=1e-9, atol=1e-14):
            return (
                f"the direction is right but the size is {scale:.3g}× the full batch's: check "
                "what the summed loss is divided by"
            )
        return "micro-batches with few tokens weigh too much: every real token should weigh 1/N"
    return None
