"""Tiny, named, seeded models. Each builds the same weights for the same seed (lesson 01+)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from ._validate import finite_float, fits_in_memory, float_dtype, fraction, one_of, positive_int
from ._validate import seed as _seed

NORMS = ("none", "batch", "layer", "group")
# The lessons' models have at most 8 hidden layers (lesson 05's deepest). Each layer is a Python
# call in every forward and took about 0.25 ms to build on a 2-core CPU, so 10**6 layers would
# take minutes before anything is learned: a typo, said before any work.
MAX_DEPTH = 1000
DEPTH_WHY = "each layer is one more Python call per forward; the lessons use at most 8"


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block on the CPU generator (and, once CUDA runs, every CUDA generator) seeded with
    `seed`, then put the caller's generator states back: building a model must not change what
    the learner's next `torch.randn` returns, on any device."""
    _seed("seed", seed)
    # torch.manual_seed seeds every CUDA generator too (lazily, if CUDA has not started): seed
    # and put back the CUDA ones only once CUDA runs, and before that touch the CPU's alone
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=cuda):
        if cuda:
            torch.manual_seed(seed)
        else:
            torch.default_generator.manual_seed(seed)
        yield


class ScalarModel(nn.Module):
    """y = w·x with one scalar weight starting at `w` (1.0 in the classic example)."""

    def __init__(self, w: float = 1.0, dtype: torch.dtype = torch.float64):
        super().__init__()
        w = finite_float("w", w)
        self.w = nn.Parameter(torch.tensor(w, dtype=float_dtype("dtype", dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w * x


def _norm_layer(norm: str, width: int, groups: int) -> nn.Module:
    if norm == "batch":
        return nn.BatchNorm1d(width)
    if norm == "layer":
        return nn.LayerNorm(width)
    if norm == "group":
        return nn.GroupNorm(groups, width)
    return nn.Identity()


def mlp(
    features: int = 4,
    hidden: int = 16,
    outputs: int = 1,
    *,
    depth: int = 2,
    norm: str = "none",
    groups: int = 4,
    dropout: float = 0.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> nn.Sequential:
    """`depth` hidden layers of Linear → norm → Tanh (→ Dropout), then a Linear head."""
    for name, value in (("features", features), ("hidden", hidden), ("outputs", outputs)):
        positive_int(name, value)
    positive_int("depth", depth, maximum=MAX_DEPTH, why=DEPTH_WHY)
    one_of("norm", norm, NORMS)
    positive_int("groups", groups)
    if norm == "group" and hidden % groups:
        raise ValueError(f"groups must divide hidden={hidden}, got groups={groups}")
    dropout = fraction("dropout", dropout)
    float_dtype("dtype", dtype)
    count = features * hidden + (depth - 1) * hidden * hidden + hidden * outputs
    count += depth * 3 * hidden + outputs  # biases and norm weights: an upper bound
    fits_in_memory(
        f"mlp(features={features}, hidden={hidden}, outputs={outputs}, depth={depth}) "
        f"({count:,} parameters)",
        count * dtype.itemsize,
    )
    with seeded(seed):
        layers: list[nn.Module] = []
        width = features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), _norm_layer(norm, hidden, groups), nn.Tanh()]
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = hidden
        layers.append(nn.Linear(width, outputs))
    return nn.Sequential(*layers).to(dtype)


class TinyLM(nn.Module):
    """Embedding → Tanh → Linear over the vocabulary, per token: logits of shape (n, T, vocab)."""

    def __init__(self, vocab: int = 32, dim: int = 16, *, seed: int = 0, dtype=torch.float64):
        super().__init__()
        positive_int("vocab", vocab, minimum=2)
        positive_int("dim", dim)
        float_dtype("dtype", dtype)
        count = 2 * vocab * dim + vocab
        fits_in_memory(
            f"TinyLM(vocab={vocab}, dim={dim}) ({count:,} parameters)", count * dtype.itemsize
        )
        with seeded(seed):
            self.embed = nn.Embedding(vocab, dim).to(dtype)
            self.head = nn.Linear(dim, vocab).to(dtype)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.embed(tokens)))
