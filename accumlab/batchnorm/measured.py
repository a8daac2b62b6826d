"""What the BatchNorm layer itself used, read back from its output and its buffers rather than
recomputed: the mean and variance it normalised with, and the variance its running update received
(the unbiased one). Lesson 04."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .._threads import one_thread
from ..data import Data
from ..engine import forward
from .layers import _check_data, batchnorm_layers, check_micro_batches


@one_thread()
def layer_statistics(model: nn.Module, data: Data, micro_batch_size: int) -> dict:
    """Per micro-batch, the first BatchNorm layer's own numbers in a training-mode forward:

    means, vars:   the mean and variance it normalised with, recovered from its input x and output
                   y: y = γ·(x − μ)/√(σ² + eps) + β is a straight line in x per channel, whose slope
                   and intercept give μ and σ²
    running_means, running_vars: what its running-statistics update received, read from its
                   buffers after one forward with momentum 1 (the buffer then holds exactly that)
    sizes:         samples per micro-batch

    Tensors are (micro-batches, channels). Works on copies; the caller's buffers stay untouched.
    """
    _check_data(data)
    check_micro_batches(model, data, micro_batch_size)
    bns = batchnorm_layers(model)
    if not bns:
        raise ValueError("model has no BatchNorm layer")
    out = {"means": [], "vars": [], "running_means": [], "running_vars": [], "sizes": []}
    for mb in data.micro_batches(micro_batch_size):
        copy_ = copy.deepcopy(model).train()
        bn = batchnorm_layers(copy_)[0]
        bn.momentum = 1.0  # the running buffers become this micro-batch's update, nothing older
        seen = {}
        handle = bn.register_forward_hook(
            lambda _m, args, y, seen=seen: seen.update(x=args[0].detach(), y=y.detach())
        )
        try:
            with torch.no_grad():
                forward(copy_, mb, f"a micro-batch of {len(mb)}")
        finally:
            handle.remove()
        x, y = seen["x"], seen["y"]
        gamma = bn.weight.detach() if bn.affine else torch.ones_like(x[0])
        beta = bn.bias.detach() if bn.affine else torch.zeros_like(x[0])
        xhat = (y - beta) / gamma
        # least squares x = μ + s·x̂ per channel: s = √(σ² + eps), exact up to rounding
        xc, hc = x - x.mean(0), xhat - xhat.mean(0)
        s = (xc * hc).sum(0) / (hc * hc).sum(0)
        out["means"].append(x.mean(0) - s * xhat.mean(0))
        out["vars"].append(s * s - bn.eps)
        out["running_means"].append(bn.running_mean.clone())
        out["running_vars"].append(bn.running_var.clone())
        out["sizes"].append(len(mb))
    for key in ("means", "vars", "running_means", "running_vars"):
        out[key] = torch.stack(out[key])
    return out


@one_thread()
def normalized_values(model: nn.Module, data: Data, micro_batch_size: int) -> dict:
    """What every BatchNorm layer of `model` computes when `data` arrives in micro-batches of
    `micro_batch_size` (training mode, on a copy): its input x and its normalised values
    x̂ = (x − μ)/√(σ² + eps), read back from its output as (y − β)/γ.

    Returns {"layers": the layers' names, "inputs", "normalized": one (samples, channels) tensor
    per layer, the micro-batches' rows in order}. With micro-batches of 2, x̂ of the pair is
    ±d/√(d² + eps) with d = (x₁ − x₂)/2: ±1 unless the two samples nearly agree. Lesson 04.
    """
    _check_data(data)
    check_micro_batches(model, data, micro_batch_size)
    model = copy.deepcopy(model).train()
    layers = [
        (n, m) for n, m in model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
    ]
    if not layers:
        raise ValueError("model has no BatchNorm layer: nothing normalises with batch statistics")
    for name, bn in layers:
        if bn.affine and bool((bn.weight == 0).any()):
            raise ValueError(
                f"BatchNorm layer {name!r} has a scale γ of 0 in some channel: its output there "
                "no longer shows the normalised value"
            )
    seen = {name: ([], []) for name, _ in layers}

    def keep(name):
        def hook(_module, args, y):  # returns None: the output passes on unchanged
            seen[name][0].append(args[0].detach())
            seen[name][1].append(y.detach())

        return hook

    handles = [bn.register_forward_hook(keep(name)) for name, bn in layers]
    try:
        with torch.no_grad():
            for j, mb in enumerate(data.micro_batches(micro_batch_size)):
                forward(model, mb, f"micro-batch {j}")
    finally:
        for handle in handles:
            handle.remove()
    out = {"layers": [], "inputs": [], "normalized": []}
    for name, bn in layers:
        x, y = torch.cat(seen[name][0]), torch.cat(seen[name][1])
        if bn.affine:  # γ and β per channel: dimension 1 of (N, C), (N, C, L), (N, C, H, W)
            shape = (1, -1, *[1] * (y.dim() - 2))
            y = (y - bn.bias.detach().view(shape)) / bn.weight.detach().view(shape)
        out["layers"].append(name)
        out["inputs"].append(x)
        out["normalized"].append(y)
    return out
