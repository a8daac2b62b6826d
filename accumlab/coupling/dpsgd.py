"""Per-sample clipping (DP-SGD): every sample's gradient is clipped to a norm C before the sum.
Clip-then-sum is a sum of per-sample terms, so accumulation can reproduce it exactly — as long as
the clipping happens per sample, not per micro-batch or per window (lesson 09)."""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from .._threads import one_thread
from .._validate import one_of, positive_float
from ..data import Data
from ..run_inputs import forward
from ._checks import require_data, require_model, require_seed

# per_sample: clip each sample, sum (DP-SGD; what opacus accumulates over virtual steps);
# micro_batch: clip each micro-batch's summed gradient; window: sum everything, then clip once
CLIP_MODES = ("per_sample", "micro_batch", "window")


@one_thread()
def per_sample_grads(model: nn.Module, data: Data) -> dict[str, torch.Tensor]:
    """{name: (N, *shape)}: the gradient of each sample's squared error alone (torch.func.vmap
    over torch.func.grad). Lesson 09."""
    require_model(model)
    require_data(data)
    if not data.y.is_floating_point():  # the per-sample loss here is a squared error
        raise ValueError(f"data.y must hold float regression targets, got dtype {data.y.dtype}")
    with torch.no_grad():  # shapes said in the lesson's words, not in vmap's
        forward(model, data, "data")
    params = {n: p.detach() for n, p in model.named_parameters()}

    def one(p, x, y):
        pred = functional_call(model, p, (x[None],))
        return torch.nn.functional.mse_loss(pred, y[None], reduction="sum")

    return vmap(grad(one), in_dims=(None, 0, 0))(params, data.x, data.y)


def _norms(grads: dict[str, torch.Tensor]) -> torch.Tensor:
    """One L2 norm per row, over all parameters together."""
    return torch.cat([g.reshape(len(g), -1) for g in grads.values()], dim=1).norm(dim=1)


def _clip(grads: dict[str, torch.Tensor], clip_norm: float) -> dict[str, torch.Tensor]:
    """Scale each row to norm at most `clip_norm` (rows: samples, or micro-batch sums)."""
    factor = (clip_norm / (_norms(grads) + 1e-12)).clamp(max=1.0)  # + ε: a zero gradient stays 0
    return {n: g * factor.reshape(-1, *[1] * (g.dim() - 1)) for n, g in grads.items()}


def _clip_one(grads: dict[str, torch.Tensor], clip_norm: float) -> dict[str, torch.Tensor]:
    """Clip one gradient (a dict of tensors) to norm `clip_norm`."""
    return {n: g[0] for n, g in _clip({n: g[None] for n, g in grads.items()}, clip_norm).items()}


@one_thread()
def clipped_grads(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    clip_norm: float,
    mode: str,
    *,
    noise_multiplier: float = 0.0,
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """The clipped gradient of one optimizer step over `data`, as a loop over micro-batches of
    `micro_batch_size` computes it, clipped where `mode` says (CLIP_MODES):

    per_sample:  each micro-batch's per-sample gradients (vmap), each clipped to `clip_norm`,
                 summed into a running sum (Opacus' `p.summed_grad`)
    micro_batch: each micro-batch's gradient (one backward of its summed loss) clipped, then added
    window:      the micro-batch gradients accumulated in .grad by backward, the sum clipped once

    Then, once per step, Gaussian noise of standard deviation noise_multiplier × clip_norm (none by
    default; drawn from a generator seeded with `seed`) is added and the sum divided by len(data),
    as DP-SGD does for the logical batch. Runs on a copy of `model`. Lesson 09."""
    one_of("mode", mode, CLIP_MODES)
    clip_norm = positive_float("clip_norm", clip_norm)
    noise_multiplier = positive_float("noise_multiplier", noise_multiplier, allow_zero=True)
    seed = require_seed(seed)
    micro = require_data(data).micro_batches(micro_batch_size)
    require_model(model)
    names = [n for n, _ in model.named_parameters()]
    if mode == "per_sample":
        total = None
        for mb in micro:
            clipped = _clip(per_sample_grads(model, mb), clip_norm)
            part = {n: g.sum(0) for n, g in clipped.items()}
            total = part if total is None else {n: total[n] + part[n] for n in names}
    else:
        replica = copy.deepcopy(model)
        replica.zero_grad(set_to_none=True)
        total = {n: torch.zeros_like(p) for n, p in replica.named_parameters()}
        for mb in micro:
            pred = forward(replica, mb, "data")
            torch.nn.functional.mse_loss(pred, mb.y, reduction="sum").backward()
            if mode == "micro_batch":  # clip what this micro-batch added, then start afresh
                grads = {n: p.grad.detach().clone() for n, p in replica.named_parameters()}
                total = {n: total[n] + g for n, g in _clip_one(grads, clip_norm).items()}
                replica.zero_grad(set_to_none=True)
        if mode == "window":
            grads = {n: p.grad.detach().clone() for n, p in replica.named_parameters()}
            total = _clip_one(grads, clip_norm)
    if noise_multiplier > 0:  # once per logical batch, never per micro-batch
        g = torch.Generator().manual_seed(seed)
        total = {
            n: t + noise_multiplier * clip_norm * torch.randn(t.shape, generator=g, dtype=t.dtype)
            for n, t in total.items()
        }
    return {n: t / len(data) for n, t in total.items()}


def clip_fraction(model: nn.Module, data: Data, clip_norm: float) -> float:
    """Share of samples whose gradient norm exceeds `clip_norm` (those the clipping changes)."""
    clip_norm = positive_float("clip_norm", clip_norm)
    return float((_norms(per_sample_grads(model, data)) > clip_norm).double().mean())


def median_grad_norm(model: nn.Module, data: Data) -> float:
    """The median per-sample gradient norm: a clipping norm that clips about half the samples."""
    return float(_norms(per_sample_grads(model, data)).median())
