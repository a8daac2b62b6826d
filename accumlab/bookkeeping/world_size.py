"""Resuming on another number of ranks (lesson 10): which samples each optimizer step sees when
torch's `DistributedSampler` deals an epoch's order out to the ranks, so that a run can keep
micro-batch × k × ranks by changing k and still step on the same windows."""

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
    from torch.utils.data import DistributedSampler  # torch only when called

    shards = []
    for rank in range(ranks):
        sampler = DistributedSampler(range(samples), num_replicas=ranks, rank=rank, seed=seed)
        sampler.set_epoch(epoch)
        shards.append(list(sampler))
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
