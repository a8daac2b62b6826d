"""What a bfloat16 model with a float32 main gradient holds once it takes an AdamW step: float32
master weights that read the main gradient, AdamW's two float32 moments per parameter, and the
bfloat16 copy the forward reads; against a float32 model that steps AdamW directly (lesson 12).

Bytes are counted from the tensors themselves (`nelement() * element_size()`) after the step, per
parameter: what lives between steps, not an allocator peak (transient bfloat16 `.grad`s, autocast
caches and activations are not counted).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from .._threads import one_thread
from .._validate import positive_int
from .accumulator import MainGrad

# Megatron-LM's distributed optimizer shards these over the d data-parallel ranks; the bfloat16
# parameters and the gradient buffer stay whole on every rank (its dist_optimizer guide)
SHARDED = ("master", "adam")


def _nbytes(tensors) -> int:
    return sum(t.nelement() * t.element_size() for t in tensors)


def _adam_bytes(optimizer: torch.optim.Optimizer) -> int:
    # exp_avg and exp_avg_sq are one float32 per parameter each; the per-tensor `step` counter is a
    # 0-d tensor, not a per-parameter cost
    return sum(
        _nbytes(v for v in state.values() if torch.is_tensor(v) and v.dim() > 0)
        for state in optimizer.state.values()
    )


def _accumulate(model, chunks) -> None:
    k = len(chunks)
    dtype = next(model.parameters()).dtype
    for mb in chunks:
        pred = model(mb.x.to(dtype))
        (F.mse_loss(pred.float(), mb.y.float()) / k).backward()


@one_thread()
def master_weight_step(*, micro_batches: int = 8, seed: int = 0) -> dict:
    """One AdamW step both ways, after accumulating `micro_batches` micro-batches of 4 samples.

    bfloat16 route: bfloat16 parameters, `MainGrad` (float32), float32 master weights whose `.grad`
    is the main gradient, AdamW on the masters, then the masters copied (rounded) into the bfloat16
    parameters. float32 route: float32 parameters, `.grad`, AdamW. Returns
    {"bytes": {route: {part: bytes per parameter}}, "stepped": bool, "parameters": count}; stepped
    is True when the masters moved and every bfloat16 parameter is its master rounded to bfloat16.
    """
    from ..data import regression_data
    from ..models import mlp

    k = positive_int("micro_batches", micro_batches, maximum=4096)
    base = mlp(8, 32, depth=1, seed=positive_int("seed", seed, minimum=0))
    chunks = regression_data(n=4 * k, features=8, seed=seed).micro_batches(4)
    n = sum(p.numel() for p in base.parameters())

    bf16 = copy.deepcopy(base).to(torch.bfloat16)
    main = MainGrad(bf16)
    _accumulate(bf16, chunks)
    main.remove()
    masters = {name: p.detach().float().clone() for name, p in bf16.named_parameters()}
    for name, m in masters.items():
        m.requires_grad_(True)
        m.grad = main.buffers[name]  # float32 gradient on a float32 tensor: no dtype mix
    start = {name: m.detach().clone() for name, m in masters.items()}
    adam = torch.optim.AdamW(list(masters.values()), lr=1e-3)
    adam.step()
    with torch.no_grad():
        for name, p in bf16.named_parameters():
            p.copy_(masters[name])  # the forward's copy, rounded to bfloat16
    moved = any(not torch.equal(m.detach(), start[name]) for name, m in masters.items())
    rounded = all(
        torch.equal(p.detach(), masters[name].detach().to(torch.bfloat16))
        for name, p in bf16.named_parameters()
    )

    fp32 = copy.deepcopy(base).float()
    _accumulate(fp32, chunks)
    adam32 = torch.optim.AdamW(fp32.parameters(), lr=1e-3)
    adam32.step()
    return {
        "bytes": {
            "bfloat16 + main grad + master": {
                "params": _nbytes(bf16.parameters()) / n,
                "main_grad": main.nbytes / n,
                "master": _nbytes(masters.values()) / n,
                "adam": _adam_bytes(adam) / n,
            },
            "float32": {
                "params": _nbytes(fp32.parameters()) / n,
                "grad": _nbytes(p.grad for p in fp32.parameters()) / n,
                "adam": _adam_bytes(adam32) / n,
            },
        },
        "stepped": moved and rounded,
        "parameters": n,
    }


def sharded_bytes(parts: dict, ranks: int) -> float:
    """Bytes per parameter on one of `ranks` data-parallel ranks when the SHARDED parts (master
    weights, Adam moments) are split across them, as Megatron-LM's distributed optimizer does."""
    d = positive_int("ranks", ranks)
    return sum(v / d if part in SHARDED else v for part, v in parts.items())
