"""Lesson 02: the loop with `zero_grad()` at the top of every iteration steps with the last
micro-batch's gradient ÷ k. How long is that, against the full-batch gradient? It depends on which
micro-batch happens to come last; on average over the window the micro-batches' gradients are at
least as long as the full batch's, because they average to it."""

from __future__ import annotations

import torch

from .. import _validate
from .._validate import positive_int
from ..compare import flatten
from ..data import Data, regression_data
from ..models import mlp
from ..reference import full_batch_grads

# seeds the survey may take: each is one model, one data set and k + 1 backward passes
MAX_SEEDS = 1000


def last_only_lengths(model, data: Data, micro_batch_size: int, *, loss: str = "mse") -> dict:
    """Lesson 02: split `data` (one window) into k micro-batches of `micro_batch_size`; for each
    micro-batch j, were it the last one, the buggy loop's gradient is g_j / k. Returns

    - "ratios": |g_j / k| / |g| for each j (g the full-batch gradient), in the data's order;
    - "cosines": the cosine between g_j and g for each j (g_j / k points where g_j points);
    - "k";
    - "mean_square": mean_j |g_j|² / |g|², and "spread": mean_j |g_j − g|² / |g|². Because the
      micro-batch gradients average to g (equal sizes, mean loss, a model and loss that treat each
      sample on its own), mean_square = 1 + spread ≥ 1: in root mean square a micro-batch's
      gradient is at least as long as the full batch's.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    positive_int("micro_batch_size", micro_batch_size)
    if micro_batch_size >= len(data) or len(data) % micro_batch_size:
        raise ValueError(
            f"micro_batch_size must split data's {len(data)} samples into at least 2 equal "
            f"micro-batches, got {micro_batch_size}"
        )
    full = flatten(full_batch_grads(model, data, loss=loss))
    if not float(full.norm()) > 0:
        raise ValueError("the full-batch gradient of model on data is zero: no length to compare")
    batches = data.micro_batches(micro_batch_size)
    parts = [flatten(full_batch_grads(model, mb, loss=loss)) for mb in batches]
    k, norm2 = len(parts), float(full.dot(full))
    return {
        "ratios": [float(g.norm()) / k / norm2**0.5 for g in parts],
        "cosines": [float(torch.nn.functional.cosine_similarity(g, full, dim=0)) for g in parts],
        "k": k,
        "mean_square": sum(float(g.dot(g)) for g in parts) / k / norm2,
        "spread": sum(float((g - full).dot(g - full)) for g in parts) / k / norm2,
    }


def last_only_survey(seeds=range(40), *, samples: int = 32, micro_batch_size: int = 8) -> list:
    """Lesson 02: `last_only_lengths` for lesson 02's regression problem (3 features, an MLP with
    8 hidden units) drawn with each of `seeds` — the data and the model's weights both follow
    the seed. One dict per seed, with "seed" added."""
    seeds = [_validate.seed("seeds", s) for s in _validate.sequence("seeds", seeds)]
    if len(seeds) > MAX_SEEDS:
        raise ValueError(f"seeds must hold at most {MAX_SEEDS} seeds, got {len(seeds)}")
    positive_int("samples", samples, maximum=4096, why="a survey of small problems")
    out = []
    for s in seeds:
        data = regression_data(n=samples, features=3, seed=s)
        model = mlp(features=3, hidden=8, depth=1, seed=s)
        out.append({"seed": s, **last_only_lengths(model, data, micro_batch_size)})
    return out
