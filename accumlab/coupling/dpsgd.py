"""Per-sample clipping (DP-SGD): every sample's gradient is clipped to a norm C before the sum.
Clip-then-sum is a sum of per-sample terms, so accumulation can reproduce it exactly — as long as
the clipping happens per sample, not per micro-batch or per window (lesson 09)."""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from .._threads import one_thread
from .._validate import one_of, positive_float
from ..data import Data
from ..run_inputs import forward
from ._checks import require_data, require_model

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
    model: nn.Module, data: Data, micro_batch_size: int, clip_norm: float, mode: str
) -> dict[str, torch.Tensor]:
    """The clipped gradient of one optimizer step over `data`, accumulated over micro-batches of
    `micro_batch_size` and clipped as `mode` says (CLIP_MODES), divided by len(data). No noise:
    the comparison is about where the clipping sits. Lesson 09."""
    one_of("mode", mode, CLIP_MODES)
    positive_float("clip_norm", clip_norm)
    sizes = [len(mb) for mb in require_data(data).micro_batches(micro_batch_size)]
    # a sample's gradient does not depend on its micro-batch: compute them all in one vmap, then
    # walk through the micro-batches as an accumulating loop would
    rows = per_sample_grads(model, data)
    total = None
    for i, size in enumerate(sizes):
        start = sum(sizes[:i])
        per = {n: g[start : start + size] for n, g in rows.items()}
        if mode == "per_sample":
            part = {n: g.sum(0) for n, g in _clip(per, clip_norm).items()}
        else:
            part = {n: g.sum(0) for n, g in per.items()}
            if mode == "micro_batch":
                part = _clip_one(part, clip_norm)
        total = part if total is None else {n: total[n] + part[n] for n in total}
    if mode == "window":
        total = _clip_one(total, clip_norm)
    return {n: g / len(data) for n, g in total.items()}


def clip_fraction(model: nn.Module, data: Data, clip_norm: float) -> float:
    """Share of samples whose gradient norm exceeds `clip_norm` (those the clipping changes)."""
    positive_float("clip_norm", clip_norm)
    return float((_norms(per_sample_grads(model, data)) > clip_norm).double().mean())


def median_grad_norm(model: nn.Module, data: Data) -> float:
    """The median per-sample gradient norm: a clipping norm that clips about half the samples."""
    return float(_norms(per_sample_grads(model, data)).median())
