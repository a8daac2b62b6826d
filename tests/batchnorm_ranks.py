"""What each rank runs when tests/test_batchnorm.py checks lesson 04's statements about BatchNorm
across processes (two gloo ranks on the CPU, launched by al.dist.launch):

- `sync_batchnorm`: PyTorch's own SyncBatchNorm autograd function
  (torch.nn.modules._functions.SyncBatchNorm: its all-gather of per-rank statistics, their
  combination, its backward all-reduce), called directly. Its five per-channel kernels
  (torch.batch_norm_stats & co.) exist only for accelerators, so on the CPU each is replaced by the
  formula it computes, written below: what this run proves is the function's multi-rank logic and
  collectives, not the CUDA kernels.
- `ddp_buffers`: a plain BatchNorm model under DistributedDataParallel with no_sync: which rank's
  running statistics survive.
"""

from __future__ import annotations

import contextlib
import inspect

import torch
import torch.distributed as dist
import torch.nn.functional as F

import accumlab as al

CHANNELS, PER_RANK, MICRO_STEPS = 3, 4, 3


# --- CPU stand-ins for SyncBatchNorm's CUDA-only kernels -------------------------------------------


def _dims(x):
    return [d for d in range(x.dim()) if d != 1]


def _shape(x):
    return [1, -1] + [1] * (x.dim() - 2)


def _stats(x, eps):
    """batch_norm_stats: per-channel mean and 1/√(biased variance + eps) of this rank's input."""
    mean = x.mean(_dims(x))
    return mean, (x.var(_dims(x), unbiased=False) + eps).rsqrt()


def _gather(x, mean_all, invstd_all, running_mean, running_var, momentum, eps, counts):
    """batch_norm_gather_stats_with_counts: the statistics of all ranks' samples together, and the
    running update with the unbiased variance, from each rank's mean, invstd and count."""
    n = counts.sum()
    mean = (counts[:, None] * mean_all).sum(0) / n
    var_all = invstd_all.pow(-2) - eps  # each rank's biased variance
    var = (counts[:, None] * (var_all + (mean_all - mean) ** 2)).sum(0) / n
    if running_mean is not None:
        running_mean.mul_(1 - momentum).add_(momentum * mean)
        running_var.mul_(1 - momentum).add_(momentum * var * n / (n - 1))
    return mean, (var + eps).rsqrt()


def _elemt(x, weight, bias, mean, invstd, eps):
    """batch_norm_elemt: normalise with the given statistics, then scale and shift."""
    y = (x - mean.view(_shape(x))) * invstd.view(_shape(x))
    if weight is not None:
        y = y * weight.view(_shape(x)) + bias.view(_shape(x))
    return y


def _backward_reduce(dy, x, mean, invstd, weight, input_g, weight_g, bias_g):
    """batch_norm_backward_reduce: this rank's Σ dy and Σ dy·(x − mean) per channel, and its part
    of the scale's and shift's gradients."""
    xmu = x - mean.view(_shape(x))
    sum_dy, sum_dy_xmu = dy.sum(_dims(x)), (dy * xmu).sum(_dims(x))
    grad_weight = sum_dy_xmu * invstd if weight_g else None
    return sum_dy, sum_dy_xmu, grad_weight, sum_dy if bias_g else None


def _backward_elemt(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    """batch_norm_backward_elemt: the input gradient from the all-reduced sums over all N samples."""
    n = count.sum().to(x.dtype)
    s = _shape(x)
    xhat = (x - mean.view(s)) * invstd.view(s)
    scale = invstd.view(s) * (weight.view(s) if weight is not None else 1.0)
    return scale * (dy - sum_dy.view(s) / n - xhat * (sum_dy_xmu * invstd).view(s) / n)


KERNELS = {
    "batch_norm_stats": _stats,
    "batch_norm_gather_stats_with_counts": _gather,
    "batch_norm_elemt": _elemt,
    "batch_norm_backward_reduce": _backward_reduce,
    "batch_norm_backward_elemt": _backward_elemt,
}


@contextlib.contextmanager
def cpu_kernels_and_counted_collectives(counts: dict):
    """The stand-in kernels in place of torch's, and every all_gather / all_reduce counted."""
    saved = {name: getattr(torch, name) for name in KERNELS}
    collectives = {name: getattr(dist, name) for name in ("all_gather", "all_reduce")}

    def counted(name):
        def call(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return collectives[name](*args, **kwargs)

        return call

    try:
        for name, fn in KERNELS.items():
            setattr(torch, name, fn)
        for name in collectives:
            setattr(dist, name, counted(name))
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)
        for name, fn in collectives.items():
            setattr(dist, name, fn)


def _layer(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    weight = (0.5 + torch.rand(CHANNELS, generator=g, dtype=torch.float64)).requires_grad_()
    bias = torch.randn(CHANNELS, generator=g, dtype=torch.float64).requires_grad_()
    return weight, bias


def _micro_batch(step: int, per_rank: int, world: int, extra: tuple = ()):
    """All ranks' samples of one micro-step (world × per_rank rows) and the loss's weights."""
    g = torch.Generator().manual_seed(100 + step)
    x = 3 + 2 * torch.randn(world * per_rank, CHANNELS, *extra, generator=g, dtype=torch.float64)
    target = torch.randn(x.shape, generator=g, dtype=torch.float64)
    return x, target


def sync_batchnorm(ctx, *, per_rank: int = PER_RANK, steps: int = MICRO_STEPS, extra=()) -> dict:
    """`steps` micro-steps of SyncBatchNorm over `ctx.world_size` ranks of `per_rank` samples
    each (a loss that weighs every output), against one process normalising all
    world × per_rank samples with F.batch_norm. Returns the largest differences and the number of
    collectives the SyncBatchNorm function called."""
    from torch.nn.modules._functions import SyncBatchNorm

    world, rank = ctx.world_size, ctx.rank
    weight, bias = _layer()
    ref_weight, ref_bias = (t.detach().clone().requires_grad_() for t in (weight, bias))
    running = [
        torch.zeros(CHANNELS, dtype=torch.float64),
        torch.ones(CHANNELS, dtype=torch.float64),
    ]
    ref_running = [t.clone() for t in running]
    counts: dict = {}
    worst = {"output": 0.0, "input_grad": 0.0, "running": 0.0}
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    for step in range(steps):
        x, target = _micro_batch(step, per_rank, world, tuple(extra))
        xs = x[mine].clone().requires_grad_()
        with cpu_kernels_and_counted_collectives(counts):
            y = SyncBatchNorm.apply(xs, weight, bias, *running, 1e-5, 0.1, dist.group.WORLD, world)
            ((y * target[mine]).sum() + (y**2).sum()).backward()
        x_all = x.clone().requires_grad_()
        y_ref = F.batch_norm(x_all, *ref_running, ref_weight, ref_bias, True, 0.1, 1e-5)
        ((y_ref * target).sum() + (y_ref**2).sum()).backward()
        worst["output"] = max(worst["output"], float((y - y_ref[mine]).abs().max()))
        worst["input_grad"] = max(
            worst["input_grad"], float((xs.grad - x_all.grad[mine]).abs().max())
        )
        worst["running"] = max(
            worst["running"],
            *(float((a - b).abs().max()) for a, b in zip(running, ref_running, strict=True)),
        )
    # the scale's and shift's gradients stay per rank (DDP all-reduces them): summed, the full one
    grads = torch.cat([weight.grad, bias.grad])
    dist.all_reduce(grads)
    worst["param_grad"] = float((grads - torch.cat([ref_weight.grad, ref_bias.grad])).abs().max())
    return {
        **worst,
        "all_gather": counts.get("all_gather", 0),
        "all_reduce": counts.get("all_reduce", 0),
    }


def ddp_buffers(
    ctx, *, k: int = 2, windows: int = 2, micro: int = 4, sync_buffers: bool = True
) -> dict:
    """Plain BatchNorm under DDP (gloo, CPU), each rank its own data, `windows` optimizer windows of
    `k` micro-steps with no_sync on all but the last (no optimizer: the weights stay, so only the
    buffers move). Records the first BatchNorm's running mean as each forward reaches it (after
    DDP's buffer broadcast) and at the end. sync_buffers=False switches the forward broadcast off
    (`forward_sync_buffers`, called `broadcast_buffers` where torch has no such argument)."""
    model = al.batchnorm.norm_model("batch")
    ddp_class = torch.nn.parallel.DistributedDataParallel
    options = {}
    if not sync_buffers:  # the default stays untouched: that is what the lesson describes
        names = inspect.signature(ddp_class).parameters
        options[
            "forward_sync_buffers" if "forward_sync_buffers" in names else "broadcast_buffers"
        ] = False
    ddp = ddp_class(model, **options)
    bn = al.batchnorm.batchnorm_layers(ddp.module)[0]
    entering = []
    bn.register_forward_pre_hook(lambda m, args: entering.append(m.running_mean.clone()))
    data = al.batchnorm.batchnorm_data(windows * k * micro, seed=1 + ctx.rank)  # per-rank data
    chunks = list(data.micro_batches(micro))
    for w in range(windows):
        for j in range(k):
            mb = chunks[w * k + j]
            sync = j == k - 1
            with contextlib.nullcontext() if sync else ddp.no_sync():
                F.cross_entropy(ddp(mb.x), mb.y).backward()
    return {
        "entering": torch.stack(entering),
        "final": bn.running_mean.clone(),
        "x": data.x,
    }


# micro-batch per rank, extra input dims: 4 rows; ONE row per rank (SyncBatchNorm accepts it when
# the group has ≥ 2 ranks); (N, C, 2, 2) images, statistics over N·H·W
SYNC_CASES = ((4, ()), (1, ()), (2, (2, 2)))


def sync_batchnorm_cases(ctx) -> list:
    return [sync_batchnorm(ctx, per_rank=n, extra=extra) for n, extra in SYNC_CASES]
