"""Lesson 03 exercises: what a log shows, a short last window, dividing when ranks are summed, and a
class-weighted token loss."""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

from ..data import IGNORE_INDEX
from ..engine import grads_of
from ..models import TinyLM
from . import exercise
from ._answers import Hint, compare, integer
from ._calls import audit_loops
from ._draws import fresh_rng
from ._graph_watch import OutputGradients
from ._observe import Added as _Added
from ._observe import Observe, Refuse, forwards_phrase, multiple_of, plural

# 03.1: one window, global count; the last mean is not 1, so forgetting it changes the answer
LOG_TOKENS, LOG_MEANS, LOG_K = [30, 70], [2.0, 1.5], 2
SAMPLES, K = 22, 3  # 03.2
RANK_TOKENS = [[30, 10], [45, 15]]  # 03.3: real tokens per micro-batch, per rank (k = 2)
VOCAB = 12  # 03.4
EXACT = 1e-12  # float64 round-off: "exactly the full-batch gradient"
# 03.4: what the answer must write itself, not take from accumlab
REFUSED = (
    "al.full_batch_grads",
    "al.accumulated_grads",
    "al.run",
    "al.scaling.weighted_grads",
    "al.scaling.simulated_ranks_grads",
)


@exercise("03.1", 1, "what k × the last scaled micro-loss logs under the global count")
def logged_k_times_last(answer):
    tokens = sum(LOG_TOKENS)
    last_scaled = LOG_TOKENS[-1] * LOG_MEANS[-1] / tokens  # its summed loss over the window's N
    window_mean = sum(n * m for n, m in zip(LOG_TOKENS, LOG_MEANS, strict=True)) / tokens
    return compare(
        answer,
        LOG_K * last_scaled,
        sig=3,
        wrong={
            window_mean: "that is what the log should show, the window's token mean; the loop "
            "prints k × the last scaled micro-loss",
            last_scaled: "that is the last scaled micro-loss itself; the loop multiplies it by k",
            LOG_MEANS[-1]: "that is the last micro-batch's own mean (or an integer division): "
            f"under the global count its scaled loss is its summed loss ÷ all {tokens} tokens",
            sum(LOG_MEANS) / len(LOG_MEANS): "that is the mean of the two means",
            LOG_K * LOG_TOKENS[-1] / tokens: "that is k × the last micro-batch's share of the "
            "tokens: its scaled loss also carries its mean loss",
        },
        otherwise="the last micro-batch's scaled loss is its summed loss (tokens × mean) ÷ the "
        "window's real tokens; the log multiplies that by k",
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


@exercise("03.3", 2, "the divisor when the loop sums the ranks' gradients itself")
def rank_divisor(answer):
    ranks, mine = len(RANK_TOKENS), RANK_TOKENS[1][1]
    total = sum(map(sum, RANK_TOKENS))
    integer(answer)  # a count of tokens: 99.6 is not "100 to 3 digits", it is no count
    return compare(
        answer,
        total,
        abs=0,  # a token count is exact
        wrong={
            total / ranks: "N / ranks is right under DDP, which AVERAGES the ranks' gradients; "
            "dist.all_reduce(p.grad) SUMS them",
            mine: "that is this micro-batch's own count: every token of the step must weigh "
            "the same, whichever micro-batch and rank holds it",
            sum(RANK_TOKENS[1]): "that is rank 1's own window: count every rank's tokens (an "
            "all-reduce of the count)",
            sum(RANK_TOKENS[1]) / ranks: "count the window's tokens on every rank, not only on "
            "rank 1 — and a SUM all-reduce divides by nothing",
        },
        otherwise="count the real tokens of the whole window on every rank, then ask what "
        "dist.all_reduce (a sum) does to the gradients",
    )


def _token_batches(lengths: list[int], micro_batch_size: int, seed: int):
    from ..data import token_data

    data = token_data(lengths=lengths, vocab=VOCAB, seed=seed)
    return data, data.micro_batches(micro_batch_size)


def class_weights(seed: int) -> torch.Tensor:
    """03.4's weight per class: positive, uneven, float64 (the model's dtype)."""
    generator = torch.Generator().manual_seed(seed)
    return 0.25 + 2.75 * torch.rand(VOCAB, generator=generator, dtype=torch.float64)


def _weighted_full_batch(model, data, weight, reduction: str = "mean") -> torch.Tensor:
    """The gradient of the class-weighted mean (or summed) loss over `data`, in one backward."""
    from ..compare import flatten

    twin = copy.deepcopy(model)
    twin.zero_grad(set_to_none=True)
    logits = twin(data.x)
    F.cross_entropy(
        logits.reshape(-1, VOCAB),
        data.y.reshape(-1),
        weight=weight,
        ignore_index=IGNORE_INDEX,
        reduction=reduction,
    ).backward()
    return flatten({n: p.grad for n, p in twin.named_parameters()})


@exercise("03.4", 3, "accumulate a class-weighted token loss exactly")
def fix_loop(answer):
    from ..compare import flatten

    if not callable(answer):
        return "answer with a function accumulate(model, micro_batches, class_weight)"
    # tokens, class weights and model drawn afresh for every check: a divisor typed in does not fit
    first, second = fresh_rng().sample(range(1000), 2)
    for lengths, mb, seed in (([2, 9, 14, 3, 1, 11], 2, first), ([20, 1, 4, 7, 6], 1, second)):
        data, micro = _token_batches(lengths, mb, seed)
        weight = class_weights(seed)
        model = TinyLM(vocab=VOCAB, dim=6, seed=seed)
        model.zero_grad(set_to_none=True)
        # what each micro-batch's own backward adds, up to its scale: its weighted summed loss
        own = [_weighted_full_batch(model, m, weight, reduction="sum") for m in micro]
        plain = [_weighted_full_batch(model, m, None, reduction="sum") for m in micro]
        with (
            Refuse(*REFUSED, *audit_loops()),
            Observe(model, inputs=True) as seen,
            _Added(model) as added,
            OutputGradients(model) as arrived,
        ):
            answer(model, list(micro), weight.clone())  # its own list: it may consume it
        rows = [c.rows for c in seen.forwards if c.graph]  # forwards under no_grad cost nothing
        expected = [len(m) for m in micro]
        if rows != expected:
            raise Hint(
                f"your answer ran {forwards_phrase(rows)} with a graph{seen.no_graph_note()}; "
                f"accumulation runs {forwards_phrase(expected)}, one per micro-batch"
            )
        fed = seen.fed(micro)  # the rows themselves: a reshaped window has the right row count
        if fed:
            raise Hint(
                f"{fed}: accumulation feeds each micro-batch's own x to the model, once, with a "
                "graph"
            )
        if seen.backwards != len(micro) or seen.peak_graphs > 1:
            raise Hint(
                f"{seen.summary()}: call .backward() once per micro-batch, so each graph is freed "
                f"before the next forward ({plural(len(micro), 'backward pass', 'backward passes')})"
            )
        if added.foreign_forwards:
            return (
                "your answer ran a forward through another model's layers (a copy of `model`?): "
                "accumulate on `model` itself, one micro-batch at a time"
            )
        vectors = added.vectors()
        if any(not bool(v.any()) for v in vectors):
            return (
                "a backward pass added nothing to .grad: each micro-batch's backward must carry "
                "its own share of the window's gradient"
            )
        unmatched = list(range(len(micro)))
        for v in vectors:  # each backward adds one micro-batch's own gradient, each once
            j = next((j for j in unmatched if multiple_of(v, own[j], rel=1e-8)), None)
            if j is None and any(multiple_of(v, own[i], rel=1e-5) for i in unmatched):
                return (
                    "each backward pass added nearly its micro-batch's own gradient, off by about "
                    "1e-7 relative, as if rounded like float32: keep the logits, weights and loss "
                    "in float64"
                )
            if j is None and any(multiple_of(v, plain[i], rel=1e-8) for i in unmatched):
                return "a backward pass left the class weights out: pass weight=class_weight"
            if j is None:
                return (
                    "a backward pass added something other than one micro-batch's own gradient: "
                    "each micro-batch's backward carries the loss of that micro-batch's tokens"
                )
            unmatched.remove(j)
        through = arrived.through_outputs(model)
        leaked = bool((sum(vectors) - through).abs().max() > 1e-8 * through.abs().max())
        if leaked or arrived.not_own(micro, lambda out, mb, w=weight: _logit_direction(out, mb, w)):
            return (
                "your backward passes added to .grad more than the gradient that reached the "
                "logits through the forwards it watched (or a forward did not receive its own "
                "loss's gradient): each micro-batch's backward starts from that micro-batch's "
                "weighted loss, through the forward it just ran, and carries nothing else"
            )
        got = flatten(grads_of(model))
        total = sum(vectors)
        if not _multiple(got, total):
            return (
                ".grad ended as something other than what the backward passes added (or a "
                "multiple of it): let backward alone write the gradient — no rescaling or "
                "overwriting .grad between passes (count the window's weight first)"
            )
        if added.restarted():  # the sum is right, but it was added up outside .grad
            return added.restart_hint(len(micro))
        want = _weighted_full_batch(model, data, weight)
        if _close(got, want):
            continue
        if _multiple(got, want):
            scale = float(got @ want / (want @ want))
            real = data.y != IGNORE_INDEX
            summed_weight = float(weight[data.y[real]].sum())
            if math.isclose(scale, summed_weight / int(real.sum()), rel_tol=1e-9):
                return (
                    f"the direction is right but the size is {scale:.3g}× the full batch's: you "
                    "divided by the real tokens; with weight=, what does the mean divide by? "
                    "(torch.nn.CrossEntropyLoss, reduction='mean')"
                )
            if math.isclose(scale, 1, rel_tol=1e-5):  # float32 round-off in the divisor
                return (
                    f"the size is {scale:.9f}× the full batch's: a divisor summed in float32 "
                    "(sum it in the loss's own float64), or shifted by an added ε?"
                )
            return (
                f"the direction is right but the size is {scale:.3g}× the full batch's: check "
                "what the summed loss is divided by"
            )
        if _close(got, _mean_of_means(model, micro, weight)):
            return (
                "this is what the loop as handed out computes: each micro-batch's weighted mean "
                "÷ the number of micro-batches, a mean of means, in which a micro-batch with "
                "less summed weight counts more; every real token should weigh its class weight "
                "÷ one window-wide divisor"
            )
        return (
            "micro-batches weigh differently from the full batch: every real token should weigh "
            "its class weight ÷ the same window-wide divisor"
        )
    return None


def _logit_direction(logits, mb, weight) -> torch.Tensor:
    """The gradient of a micro-batch's weighted summed token loss at its logits."""
    leaf = logits.detach().clone().requires_grad_()
    F.cross_entropy(
        leaf.reshape(-1, VOCAB), mb.y.reshape(-1), weight=weight, ignore_index=IGNORE_INDEX,
        reduction="sum",
    ).backward()  # fmt: skip
    return leaf.grad


def _mean_of_means(model, micro, weight) -> torch.Tensor:
    """The gradient of the starting loop: each micro-batch's weighted mean ÷ the micro-batches."""
    from ..compare import flatten

    twin = copy.deepcopy(model)
    twin.zero_grad(set_to_none=True)
    for mb in micro:
        logits = twin(mb.x)
        mean = F.cross_entropy(
            logits.reshape(-1, VOCAB), mb.y.reshape(-1), weight=weight, ignore_index=IGNORE_INDEX
        )
        (mean / len(micro)).backward()
    return flatten({n: p.grad for n, p in twin.named_parameters()})


def _close(got: torch.Tensor, want: torch.Tensor) -> bool:
    return bool((got - want).abs().max() <= 1e-10 * want.abs().max())


def _multiple(got: torch.Tensor, of: torch.Tensor) -> bool:
    """got = c · of for one c > 0, to float64 round-off."""
    if not bool(of.any()):
        return False
    scale = float(got @ of / (of @ of))
    return scale > 0 and _close(got, scale * of)
