"""RL-style loss aggregation (GRPO and relatives): per-token losses over sequences of different
lengths, split into micro-batches and ranks. Which aggregations give the same gradient however
the samples are split? (lesson 09; extends lesson 03's token normalisation)."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import one_of, positive_int
from ..compare import grad_diff
from ..data import IGNORE_INDEX, Data, _generator, token_data
from ..models import TinyLM
from ..run_inputs import forward
from ._checks import describe, require_data, require_model

# token_mean_local: each micro-batch's loss is its token mean, ÷ k (the "bnpo" loss of the trl code
#   quoted in trl #3021; verl's "token-mean" with the micro-batch's own token count) — depends on
#   the split
# seq_mean: token mean per sequence, then mean over sequences, ÷ k (that code's "grpo") — exact when
#   every micro-batch holds the same number of sequences
# token_mean_global: token sum ÷ the token count of the whole step across ranks — exact
# constant: token sum ÷ (sequences × max length), a constant (Dr. GRPO) — exact
AGGREGATIONS = ("token_mean_local", "seq_mean", "token_mean_global", "constant")


def rl_batch(
    n: int = 16, *, vocab: int = 16, min_len: int = 1, max_len: int = 24, seed: int = 0
) -> tuple[Data, torch.Tensor]:
    """n completions of random lengths (`al.token_data`) and one advantage per completion (±1 in
    random order, half each). Lesson 09."""
    n = positive_int("n", n, minimum=2)
    data = token_data(n, min_len=min_len, max_len=max_len, vocab=vocab, seed=seed)
    signs = torch.tensor([1.0, -1.0], dtype=torch.float64).repeat((n + 1) // 2)[:n]
    return data, signs[torch.randperm(n, generator=_generator(seed))]


def policy(vocab: int = 16, *, seed: int = 0) -> TinyLM:
    """The policy: accumlab's TinyLM (embedding → tanh → logits). Lesson 09."""
    return TinyLM(vocab, 8, seed=seed)


def token_losses(model: nn.Module, batch: Data, advantages: torch.Tensor) -> torch.Tensor:
    """−advantage × log π(token) for every real token, 0 on padding: shape (n, T)."""
    _advantages(advantages, len(_tokens("batch", batch)))
    logits = forward(require_model(model), batch, "batch")
    nll = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        batch.y.reshape(-1),
        reduction="none",
        ignore_index=IGNORE_INDEX,
    ).reshape(batch.y.shape)
    return advantages[:, None] * nll  # a REINFORCE-style surrogate: raise good, lower bad tokens


def _advantages(advantages, n: int) -> torch.Tensor:
    if not isinstance(advantages, torch.Tensor) or advantages.shape != (n,):
        raise ValueError(
            f"advantages must be a tensor with one value per sample ({n}), got {describe(advantages)}"
        )
    return _validate.tensor("advantages", advantages, finite=True)


def _tokens(name: str, data) -> Data:
    """Token data: integer token ids in x, integer labels (padding -100) in y."""
    require_data(data, name)
    if data.x.is_floating_point() or data.y.is_floating_point():
        raise ValueError(
            f"{name} must be token data such as al.coupling.rl_batch()'s (integer token ids in x, "
            f"labels in y), got x of dtype {data.x.dtype} and y of dtype {data.y.dtype}"
        )
    return data


def _micro_loss(losses, lengths, aggregation, *, k, ranks, total_tokens, total_seqs, max_len):
    """The loss one rank backpropagates for one micro-batch (the line that decides)."""
    if aggregation == "token_mean_local":
        return losses.sum() / lengths.sum() / k  # this micro-batch's own token count
    if aggregation == "seq_mean":
        return (losses.sum(1) / lengths).mean() / k
    if aggregation == "token_mean_global":
        return losses.sum() * ranks / total_tokens  # × ranks: DDP averages the ranks' gradients
    return losses.sum() * ranks / (total_seqs * max_len)


@one_thread()
def aggregated_grads(
    model: nn.Module,
    data: Data,
    advantages: torch.Tensor,
    *,
    aggregation: str,
    micro_batch_size: int,
    ranks: int = 1,
    order: torch.Tensor | None = None,
    max_len: int | None = None,
) -> dict[str, torch.Tensor]:
    """The gradient of one optimizer step when the samples, taken in `order`, are dealt to `ranks`
    equal shares, each accumulated in micro-batches of `micro_batch_size` and the ranks' gradients
    averaged (as DDP does). `max_len` is the constant of "constant" (default: data's width).
    Lesson 09."""
    one_of("aggregation", aggregation, AGGREGATIONS)
    require_model(model)
    _tokens("data", data)
    ranks = positive_int("ranks", ranks)
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    n = len(data)
    if n % (ranks * micro_batch_size):
        raise ValueError(
            f"ranks × micro_batch_size = {ranks} × {micro_batch_size} = "
            f"{ranks * micro_batch_size} must divide the {n} samples"
        )
    _advantages(advantages, n)
    order = torch.arange(n) if order is None else order
    if not isinstance(order, torch.Tensor) or sorted(order.tolist()) != list(range(n)):
        raise ValueError(f"order must be a permutation of range({n}), got {describe(order)}")
    lengths = data.lengths().to(torch.float64)
    if (lengths == 0).any():
        raise ValueError("every sequence needs at least one real token (a mean over 0 is 0/0)")
    max_len = data.y.shape[1] if max_len is None else positive_int("max_len", max_len)
    per_rank = n // ranks
    k = per_rank // micro_batch_size
    rank_grads = []
    for r in range(ranks):
        replica = copy.deepcopy(model)
        replica.zero_grad(set_to_none=True)
        for m in range(k):
            idx = order[
                r * per_rank + m * micro_batch_size : r * per_rank + (m + 1) * micro_batch_size
            ]
            losses = token_losses(replica, data[idx], advantages[idx])
            _micro_loss(
                losses,
                lengths[idx],
                aggregation,
                k=k,
                ranks=ranks,
                total_tokens=lengths.sum(),
                total_seqs=n,
                max_len=max_len,
            ).backward()
        rank_grads.append({name: p.grad.detach().clone() for name, p in replica.named_parameters()})
    return {name: sum(g[name] for g in rank_grads) / ranks for name in rank_grads[0]}


@one_thread()
def partition_gaps(
    model: nn.Module,
    data: Data,
    advantages: torch.Tensor,
    *,
    aggregation: str,
    micro_batch_size: int,
    ranks: int = 1,
    partitions: int = 6,
    seed: int = 0,
) -> list[float]:
    """Relative L2 gap between the big batch (one rank, one micro-batch, same aggregation) and
    each of `partitions` random splits of the same samples over ranks and micro-batches. All ≈ 0
    for an aggregation that does not care how samples are split. Lesson 09."""
    # each split recomputes the gradient on every rank: the lesson's 6 make the point
    partitions = positive_int(
        "partitions", partitions, maximum=1000, why="one gradient per rank per split"
    )
    big = aggregated_grads(
        model, data, advantages, aggregation=aggregation, micro_batch_size=len(data)
    )
    g = _generator(seed)
    gaps = []
    for _ in range(partitions):
        order = torch.randperm(len(data), generator=g)
        split = aggregated_grads(
            model,
            data,
            advantages,
            aggregation=aggregation,
            micro_batch_size=micro_batch_size,
            ranks=ranks,
            order=order,
        )
        gaps.append(grad_diff(split, big).rel_l2)
    return gaps
