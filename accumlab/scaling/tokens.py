"""Variable-length sequences: per-token weights, the mean-of-means error, and the same error across
data-parallel ranks simulated as slices of one batch (lesson 03; lesson 07 runs real processes).
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import one_of, positive_int
from ..data import Data
from ..engine import NORMALIZATIONS, Recipe, forward
from ..losses import Loss, get_loss
from . import _checks
from .weights import effective_weights

TOKEN_COUNTS = ("local", "global")  # what each rank divides its summed loss by


def token_weights(
    lengths,
    normalization: str = "global",
    *,
    micro_batch_size: int = 1,
    accumulation_steps: int | None = None,
    last_window: str = "divide_by_actual",
) -> torch.Tensor:
    """Weight of every token in the optimizer step, shape (len(lengths), max(lengths)), float64.

    `lengths[i]` is sequence i's number of real tokens; sequences are grouped `micro_batch_size`
    at a time into micro-batches, and by default all of them form ONE window (k = number of
    micro-batches). Under "mean" a token in micro-batch i weighs 1/(k·nᵢ) (k micro-batches, nᵢ
    real tokens in its micro-batch); under "global" every token weighs 1/N (N real tokens in the
    window), which is the full-batch mean. Padding positions weigh 0. Introduced in lesson 03.

    Raises ValueError for a negative length, a window with zero real tokens, a "mean"/"none"
    micro-batch with zero real tokens, or an unknown normalisation or last-window policy.
    """
    lengths = _checks.counts(lengths, "lengths")
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    if accumulation_steps is None:
        accumulation_steps = math.ceil(len(lengths) / micro_batch_size)
    recipe = Recipe(micro_batch_size, accumulation_steps, normalization, last_window)
    weights = effective_weights(lengths, recipe)
    # a sequence without real tokens has nothing to weigh: its per-item factor is not a weight
    return per_token(torch.where(weights.counts > 0, weights.per_item, 0.0), lengths)


def per_token(per_sample: torch.Tensor, lengths) -> torch.Tensor:
    """Spread one value per sequence over its real tokens: shape (n, max(lengths)), 0 on padding.
    Lesson 03."""
    lengths = _checks.counts(lengths, "lengths")
    values = _checks.per_sample("per_sample", per_sample, len(lengths), "lengths")
    lost = ((torch.tensor(lengths) == 0) & (values != 0)).nonzero()
    if len(lost):
        i = int(lost[0])
        raise ValueError(
            f"lengths[{i}] is 0 but per_sample[{i}] = {float(values[i]):g}: a sequence without "
            "real tokens cannot carry a value, it would vanish from the result"
        )
    width = max(max(lengths), 1)
    _validate.fits_in_memory(
        f"per_token for lengths of up to {width} tokens ({len(lengths)} sequences)",
        9 * len(lengths) * width,  # a float64 result and a bool mask of that shape
    )
    real = torch.arange(width) < torch.tensor(lengths)[:, None]  # (n, width) mask of real tokens
    return torch.where(real, values[:, None], torch.zeros((), dtype=torch.float64))


def combined_loss(tokens, means, normalization: str = "global") -> float:
    """The window's loss when micro-batch i holds `tokens[i]` real tokens with mean loss `means[i]`.

    "global" gives the true mean over all tokens; "mean" the mean of the micro-batch means
    (the 10/90-token toy of lesson 03: 1.9 vs 1.5).
    """
    tokens = _checks.counts(tokens, "tokens")
    means = _validate.finite_floats("means", means)
    _validate.same_length(tokens=tokens, means=means)
    one_of("normalization", normalization, NORMALIZATIONS)
    try:
        weights = token_weights(tokens, normalization)  # one micro-batch per entry
    except ValueError as err:  # a micro-batch or window without tokens: say which argument
        raise ValueError(f"tokens={tokens}: {err}") from None
    return sum(
        float(weights[i, 0]) * n * float(m)
        for i, (n, m) in enumerate(zip(tokens, means, strict=True))
    )


def rank_slices(data: Data, ranks: int) -> list[Data]:
    """Split `data` into `ranks` equal consecutive slices, like a sampler giving each rank its
    share. Lesson 03."""
    _validate.data("data", data)
    ranks = positive_int("ranks", ranks)
    if len(data) % ranks:
        raise ValueError(f"ranks must divide the {len(data)} samples evenly, got ranks={ranks}")
    size = len(data) // ranks
    return [data[r * size : (r + 1) * size] for r in range(ranks)]


@one_thread()
def simulated_ranks_grads(
    model: nn.Module,
    data: Data,
    ranks: int,
    *,
    token_count: str = "global",
    loss: str | Loss = "cross_entropy",
) -> dict[str, torch.Tensor]:
    """Data parallelism simulated with ranks as slices: each rank backpropagates its own slice on
    its own model copy, then gradients are averaged over ranks, as DDP's all-reduce does.

    token_count="local": each rank divides by its own token count (mean of rank means: wrong when
    ranks hold different numbers of tokens). "global": the token count is all-reduced first, and
    each rank divides its summed loss by N / ranks so that the average is sum / N. Lesson 03.
    """
    _validate.model("model", model)
    one_of("token_count", token_count, TOKEN_COUNTS)
    loss_fn = get_loss(loss)
    slices = rank_slices(data, ranks)
    counts = [loss_fn.count(s.y) for s in slices]
    total = sum(counts)  # what all_reduce(SUM) of the per-rank counts gives every rank
    if total == 0:
        raise ValueError("the batch holds zero real tokens across all ranks; cannot normalise by 0")
    rank_grads = []
    for r, (part, count) in enumerate(zip(slices, counts, strict=True)):
        replica = copy.deepcopy(model)
        replica.zero_grad(set_to_none=True)
        loss_sum, _ = loss_fn(forward(replica, part, f"rank {r}'s slice of data"), part.y)
        if token_count == "local":
            if count == 0:
                raise ValueError(f"rank {r} holds zero real tokens: its local mean is 0/0")
            scaled = loss_sum / count
        else:
            scaled = loss_sum * ranks / total  # × ranks: the all-reduce below averages, not sums
        scaled.backward()
        rank_grads.append({n: p.grad.detach().clone() for n, p in replica.named_parameters()})
    return {n: sum(g[n] for g in rank_grads) / ranks for n in rank_grads[0]}  # all-reduce mean
