"""Resuming on another number of ranks (lesson 10): which samples each optimizer step sees when
torch's `DistributedSampler` deals an epoch's order out to the ranks, so that a run can keep
micro-batch × k × ranks by changing k and still step on the same full windows, and the gradient
DDP averages for one of them."""

from __future__ import annotations

from .._validate import positive_int

MAX_SAMPLES = 100_000  # index lists only, but every call builds one per rank


def window_samples(
    samples: int, micro_batch: int, k: int, ranks: int, *, seed: int = 0, epoch: int = 0
) -> dict:
    """One epoch of `samples` under `DistributedSampler(shuffle=True, seed=seed)` on `ranks`
    ranks, each rank's loader taking `micro_batch` samples a micro-step and every rank stepping
    after `k` micro-steps. Returns `windows` (each full window's sample indices, sorted: the
    samples summed into one optimizer step), `first_micro_batch` (rank 0's first micro-batch, as
    drawn) and `dealt` (the samples handed out, with the sampler's padding to a multiple of
    `ranks`). A short last window is left out, as `drop_last`-style loops drop it."""
    samples = positive_int("samples", samples, maximum=MAX_SAMPLES)
    micro_batch = positive_int("micro_batch", micro_batch)
    k, ranks = positive_int("k", k), positive_int("ranks", ranks)
    for name, value in (("seed", seed), ("epoch", epoch)):
        positive_int(name, value, minimum=0)
    shards = _shards(samples, ranks, seed, epoch)  # torch only when called
    per_window = micro_batch * k  # each rank's share of one window
    windows = [
        sorted(i for shard in shards for i in shard[w * per_window : (w + 1) * per_window])
        for w in range(len(shards[0]) // per_window)
    ]
    return {
        "windows": windows,
        "first_micro_batch": shards[0][:micro_batch],
        "dealt": sum(len(s) for s in shards),
    }


def _shards(samples: int, ranks: int, seed: int, epoch: int) -> list[list[int]]:
    from torch.utils.data import DistributedSampler

    shards = []
    for rank in range(ranks):
        sampler = DistributedSampler(range(samples), num_replicas=ranks, rank=rank, seed=seed)
        sampler.set_epoch(epoch)
        shards.append(list(sampler))
    return shards


def window_grads(
    samples: int, micro_batch: int, k: int, ranks: int, *, seed: int = 0, window: int = 0
) -> dict:
    """Full window `window` of epoch 0 (as `window_samples` deals it) on a float64 MLP with no
    dropout or BatchNorm: `ddp`, the gradient DDP averages — each rank adds its k micro-batches'
    mean MSE ÷ k into .grad, then the ranks' gradients are averaged — and `one_batch`, the mean
    MSE's gradient over the window's samples in one forward. Both flat."""
    import torch
    import torch.nn.functional as F

    from ..data import regression_data
    from ..models import mlp

    dealt = window_samples(samples, micro_batch, k, ranks, seed=seed)
    if not dealt["windows"]:
        raise ValueError(
            f"samples={samples} holds no full window of micro_batch × k × ranks = "
            f"{micro_batch * k * ranks}"
        )
    window = positive_int("window", window, minimum=0, maximum=len(dealt["windows"]) - 1)
    data, model = regression_data(samples, 3, seed=seed), mlp(3, 8, 1, depth=1, seed=seed)
    per_window = micro_batch * k

    def grad_of(loss):
        model.zero_grad(set_to_none=True)
        for part in loss:
            part.backward()
        return torch.cat([p.grad.reshape(-1) for p in model.parameters()])

    by_rank = []
    for shard in _shards(samples, ranks, seed, 0):
        mine = shard[window * per_window : (window + 1) * per_window]
        parts = [mine[i : i + micro_batch] for i in range(0, per_window, micro_batch)]
        by_rank.append(grad_of(F.mse_loss(model(data.x[p]), data.y[p]) / k for p in parts))
    rows = dealt["windows"][window]
    one = grad_of([F.mse_loss(model(data.x[rows]), data.y[rows])])
    return {"ddp": torch.stack(by_rank).mean(0), "one_batch": one}
