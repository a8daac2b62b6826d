"""Gradient clipping under accumulation (lesson 06): clip the window's gradient once, after the
last backward, or — the loop people write when they "clip every micro-batch" — call
`clip_grad_norm_` after every backward, on the running `.grad`.

The second never lets the norm exceed max_norm, so it looks harmless. But each clip rescales
everything accumulated so far: micro-batch i is multiplied by the clip coefficients of steps
i..k-1, so earlier micro-batches weigh less than later ones and the update points elsewhere.
Lesson 08's auditor models the same loop.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import _validate
from .._validate import one_of, positive_float, positive_int
from ..compare import grad_diff
from ..data import Data
from ..engine import CLIP_PLACEMENTS, Recipe, run

EPS = 1e-6  # clip_grad_norm_ multiplies by max_norm / (norm + 1e-6), capped at 1


def _update(trace) -> dict[str, torch.Tensor]:
    return {n: trace.params[0][n] - trace.initial_params[n] for n in trace.initial_params}


def clip_weights(norms: list[float], max_norm: float) -> list[float]:
    """The weight each micro-batch's gradient ends up with when `clip_grad_norm_` runs after every
    backward and saw `norms` (the running norms, one per micro-step): the product of the clip
    coefficients from its own micro-step to the window's last."""
    max_norm = positive_float("max_norm", max_norm)
    norms = _validate.finite_floats("norms", norms, minimum=0.0)
    coefs = [min(1.0, max_norm / (n + EPS)) for n in norms]
    return [math.prod(coefs[i:]) for i in range(len(coefs))]


def clipped_updates(
    model: nn.Module,
    data: Data,
    *,
    micro_batch_size: int,
    max_norm: float,
    placements: tuple[str, ...] = CLIP_PLACEMENTS,
    lr: float = 0.1,
    loss: str = "mse",
) -> dict:
    """One SGD step over all of `data` as one window, clipped at `max_norm`, per placement. Lesson 06.

    The reference is the full batch in one backward, clipped once. Returns {"full": update,
    "updates": {placement: update}, "diffs": {placement: GradDiff vs full}, "norms": {placement:
    norms clip_grad_norm_ saw}, "weights": each micro-batch's weight under "micro_step",
    "reweighted_gap": largest |update − (−lr Σ weight_i · g_i)| (0 up to rounding: the weights
    explain the update)}.
    """
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    max_norm = positive_float("max_norm", max_norm)
    for i, p in enumerate(_validate.sequence("placements", placements)):
        one_of(f"placements[{i}]", p, CLIP_PLACEMENTS)
    if len(data) % micro_batch_size:
        raise ValueError(
            f"len(data)={len(data)} must be a multiple of micro_batch_size={micro_batch_size}"
        )
    k = len(data) // micro_batch_size
    full = run(Recipe(len(data), 1, clip_norm=max_norm), model, data, loss=loss, lr=lr)
    out = {"full": _update(full), "full_norm": full.clip_norms[0], "k": k, "max_norm": max_norm}
    out["updates"], out["diffs"], out["norms"] = {}, {}, {}
    for placement in placements:
        recipe = Recipe(micro_batch_size, k, clip_norm=max_norm, clip_at=placement)
        trace = run(recipe, model, data, loss=loss, lr=lr, record_grads=False)
        out["updates"][placement] = _update(trace)
        out["diffs"][placement] = grad_diff(out["updates"][placement], out["full"])
        out["norms"][placement] = trace.clip_norms
    if "micro_step" in placements:
        # each micro-batch's own gradient (loss / k), from the unclipped running sums
        plain = run(
            Recipe(micro_batch_size, k), model, data, loss=loss, optimizer=None, record_grads=True
        )
        sums = [{n: g.clone() for n, g in s.items()} for s in plain.grads]
        own = [sums[0]] + [
            {n: b[n] - a[n] for n in b} for a, b in zip(sums, sums[1:], strict=False)
        ]
        out["weights"] = clip_weights(out["norms"]["micro_step"], max_norm)
        update = out["updates"]["micro_step"]
        out["reweighted_gap"] = max(
            float(
                (update[n] + lr * sum(w * g[n] for w, g in zip(out["weights"], own, strict=True)))
                .abs()
                .max()
            )
            for n in update
        )
    return out


def update_norm(update: dict[str, torch.Tensor]) -> float:
    """‖update‖ over every parameter, as one vector."""
    _validate.tensor_dict("update", update)
    return float(sum(u.double().pow(2).sum() for u in update.values())) ** 0.5


def clipping_sweep(
    model: nn.Module,
    data: Data,
    *,
    micro_batch_size: int,
    ratios: list[float] = (0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.5),
    lr: float = 0.1,
    loss: str = "mse",
) -> dict:
    """How far clipping after every backward bends the update, against how hard it clips: for each
    ratio r, max_norm = r × ‖full-batch gradient‖, the cosine between the update of the loop that
    clips after every backward and the full batch's, clipped once. Lesson 06.

    Returns {"ratios", "cosine", "rel_l2", "full_norm", "k"}: ratio ≥ 1 clips nothing in the full
    batch; the running sums may still be clipped when a partial window's norm exceeds max_norm."""
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    ratios = _validate.finite_floats("ratios", ratios, minimum=0.0)
    if not ratios or min(ratios) <= 0:
        raise ValueError(f"ratios must be numbers > 0, got {ratios!r}")
    if len(ratios) > 64:  # two runs per ratio: a demonstration, not a search
        raise ValueError(f"ratios must hold at most 64 values, got {len(ratios)}")
    from ..reference import full_batch_grads

    grads = full_batch_grads(model, data, loss=loss)
    norm = float(sum(g.double().pow(2).sum() for g in grads.values())) ** 0.5
    if norm == 0:
        raise ValueError("the full-batch gradient is zero: there is nothing to clip")
    out = {"ratios": list(ratios), "cosine": [], "rel_l2": [], "full_norm": norm}
    for r in ratios:
        clip = clipped_updates(
            model, data, micro_batch_size=micro_batch_size, max_norm=r * norm,
            placements=("micro_step",), lr=lr, loss=loss,
        )  # fmt: skip
        diff = clip["diffs"]["micro_step"]
        out["cosine"].append(float(diff.cosine))
        out["rel_l2"].append(float(diff.rel_l2))
    out["k"] = len(data) // micro_batch_size
    return out


def clipping_seeds(
    seeds: list[int] = (0, 1, 2, 3, 4, 5, 6, 7),
    *,
    ratios: list[float] = (0.001, 0.05, 0.8),
    n: int = 16,
    micro_batch_size: int = 4,
) -> dict:
    """Clipping after every backward, over several seeds of lesson 06's model and data: per seed,
    cos(last micro-batch's gradient, full-batch gradient) and the `clipping_sweep` cosines at
    `ratios`. Under heavy clipping the running sum is cut to max_norm before the last backward
    adds its gradient, so the update tends to the last micro-batch's direction: the cosine tends
    to cos(g_last, g), a property of the data's gradient noise, not of max_norm. Lesson 06.

    Returns {"seeds", "ratios", "last_cosine": [per seed], "cosine": [per seed: [per ratio]]}."""
    from ..data import regression_data
    from ..models import mlp
    from ..reference import full_batch_grads

    seeds = [
        positive_int(f"seeds[{i}]", s, minimum=0)
        for i, s in enumerate(_validate.sequence("seeds", seeds))
    ]
    if len(seeds) > 32:  # a few runs per seed: a demonstration, not a search
        raise ValueError(f"seeds must hold at most 32 values, got {len(seeds)}")
    n = positive_int("n", n, maximum=4096, why="a tiny demonstration")
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    if n % micro_batch_size or n == micro_batch_size:
        raise ValueError(
            f"n={n} must be a multiple of micro_batch_size={micro_batch_size}, with k ≥ 2"
        )
    ratios = _validate.finite_floats("ratios", ratios, minimum=0.0)
    if not ratios or min(ratios) <= 0:  # checked before any run, as clipping_sweep checks it
        raise ValueError(f"ratios must be numbers > 0, got {ratios!r}")
    out = {"seeds": seeds, "ratios": list(ratios), "last_cosine": [], "cosine": []}
    for seed in seeds:
        model = mlp(features=4, hidden=8, depth=1, seed=seed)
        data = regression_data(n=n, features=4, seed=seed)
        g = full_batch_grads(model, data)
        last = full_batch_grads(model, data.micro_batches(micro_batch_size)[-1])
        out["last_cosine"].append(float(grad_diff(last, g).cosine))
        sweep = clipping_sweep(model, data, micro_batch_size=micro_batch_size, ratios=ratios)
        out["cosine"].append(sweep["cosine"])
    return out
