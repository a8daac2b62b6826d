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
from .._validate import positive_float, positive_int
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
    {"bytes": {route: {part: bytes per parameter}}, "stepped": bool, "first_step_error",
    "moments_error", "parameters": count}; stepped is True when the masters moved and every
    bfloat16 parameter is its master rounded to bfloat16.
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
    first_step_error = _first_step_error(adam, masters, start, main.buffers)
    moments_error = _moments_error(adam, masters, main.buffers)
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
        "first_step_error": first_step_error,
        "moments_error": moments_error,
        "parameters": n,
    }


def _first_step_error(adam, masters: dict, start: dict, grads: dict) -> float:
    """How far each master moved from AdamW's first step computed by hand from the main gradient
    g: m̂ = g and v̂ = g² after bias correction, so Δ = −lr·(g / (|g| + eps) + weight_decay·θ).
    In units of lr: about 1e-5 from float32 rounding; ~1 if the masters read another gradient."""
    group = adam.param_groups[0]
    lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
    worst = 0.0
    for name, m in masters.items():
        g, theta = grads[name].double(), start[name].double()
        expected = -lr * (g / (g.abs() + eps) + wd * theta)
        moved = m.detach().double() - theta
        worst = max(worst, float((moved - expected).abs().max()) / lr)
    return worst


def _moments_error(adam, masters: dict, grads: dict) -> float:
    """How far AdamW's moments after its first step are from the main gradient g's: exp_avg =
    (1 − β1)·g and exp_avg_sq = (1 − β2)·g², relative to the largest entry of each. The sign-only
    step above cannot see a gradient of the wrong size; the moments hold its size (about 1e-7 from
    float32 rounding; 15 for a gradient 4 times too large, whose square is 16 times too large)."""
    beta1, beta2 = adam.param_groups[0]["betas"]
    worst = 0.0
    for name, m in masters.items():
        g, state = grads[name].double(), adam.state[m]
        for key, expected in (("exp_avg", (1 - beta1) * g), ("exp_avg_sq", (1 - beta2) * g * g)):
            scale = float(expected.abs().max()) or 1.0
            worst = max(worst, float((state[key].double() - expected).abs().max()) / scale)
    return worst


@one_thread()
def update_rounding(*, lr: float = 1e-4, steps: int = 100, seed: int = 0) -> dict:
    """Why trainers keep float32 master weights: `steps` AdamW steps of learning rate `lr` on a
    bfloat16 model from one fixed float32 main gradient (8 micro-batches), two ways. "bfloat16
    parameters": AdamW steps the bfloat16 parameters themselves, the main gradient cast back to
    bfloat16 once (then AdamW accepts it). "float32 masters": AdamW steps float32 masters and the
    bfloat16 copy is the masters rounded. Returns, per route, the fraction of bfloat16 parameters
    that never changed, and the error of the bfloat16 parameters' displacement against the float32
    masters' displacement (relative L2); and `casts_step`: whether each AdamW implementation
    (for-loop, foreach, fused) moves bfloat16 parameters given the cast-back gradient."""
    from ..data import regression_data
    from ..models import mlp

    lr = positive_float("lr", lr)
    steps = positive_int("steps", steps, maximum=10_000)
    seed = positive_int("seed", seed, minimum=0)
    bf16 = mlp(8, 32, depth=1, seed=seed).to(torch.bfloat16)
    main = MainGrad(bf16)
    _accumulate(bf16, regression_data(n=32, features=8, seed=seed).micro_batches(4))
    main.remove()
    start = {n: p.detach().clone() for n, p in bf16.named_parameters()}

    casts_step = {}
    for impl, kw in (
        ("for-loop", {"foreach": False}),
        ("foreach", {"foreach": True}),
        ("fused", {"fused": True}),
    ):
        model = copy.deepcopy(bf16)
        for name, p in model.named_parameters():
            p.grad = main.buffers[name].to(torch.bfloat16)  # the one rounding the cast costs
        torch.optim.AdamW(model.parameters(), lr=0.1, **kw).step()
        casts_step[impl] = any(
            not torch.equal(p.detach(), start[n]) for n, p in model.named_parameters()
        )

    direct = copy.deepcopy(bf16)
    for name, p in direct.named_parameters():
        p.grad = main.buffers[name].to(torch.bfloat16)
    masters = {
        n: p.detach().float().clone().requires_grad_(True) for n, p in bf16.named_parameters()
    }
    for name, m in masters.items():
        m.grad = main.buffers[name]
    opt_direct = torch.optim.AdamW(direct.parameters(), lr=lr)
    opt_master = torch.optim.AdamW(list(masters.values()), lr=lr)
    for _ in range(steps):
        opt_direct.step()
        opt_master.step()
    copied = {n: m.detach().to(torch.bfloat16) for n, m in masters.items()}

    def flat(d):
        return torch.cat([t.double().reshape(-1) for t in d.values()])

    theta0 = flat(start)
    truth = flat({n: m.detach() for n, m in masters.items()}) - theta0
    routes = {
        "bfloat16 parameters": {n: p.detach() for n, p in direct.named_parameters()},
        "float32 masters": copied,
    }
    out = {"lr": lr, "steps": steps, "casts_step": casts_step, "routes": {}}
    for route, params in routes.items():
        now = flat(params)
        out["routes"][route] = {
            "unchanged": float((now == theta0).double().mean()),
            "displacement_error": float((now - theta0 - truth).norm() / truth.norm()),
        }
    return out


def sharded_bytes(parts: dict, ranks: int) -> float:
    """Bytes per parameter on one of `ranks` data-parallel ranks when the SHARDED parts (master
    weights, Adam moments) are split across them, as Megatron-LM's distributed optimizer does."""
    d = positive_int("ranks", ranks)
    return sum(v / d if part in SHARDED else v for part, v in parts.items())
