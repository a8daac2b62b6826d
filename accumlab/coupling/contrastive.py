"""Contrastive learning with in-batch negatives (InfoNCE): each sample's loss depends on every
other sample of its batch, so k micro-batches are not one big batch (lesson 09)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import positive_float, positive_int
from ..data import Data, _generator
from ..models import mlp
from ..run_inputs import forward
from ._checks import describe, require_data, require_model
from .principle import accumulation_gap

TEMPERATURE = 0.1
LOGIT_SCALE = "logit_scale"  # open_clip's name for the learnable log(1 / temperature)


def pair_data(
    n: int = 64, features: int = 8, *, noise: float = 0.3, seed: int = 0, dtype=torch.float64
) -> Data:
    """n positive pairs: x holds the anchors, y a noisy view of each anchor (its positive). Every
    other sample's view is a negative. Lesson 09."""
    n = positive_int("n", n, minimum=2)
    features = positive_int("features", features)
    noise = positive_float("noise", noise, allow_zero=True)
    _validate.float_dtype("dtype", dtype)
    _validate.fits_in_memory(
        f"pair_data(n={n}, features={features})", 2 * n * features * dtype.itemsize
    )
    g = _generator(seed)
    x = torch.randn(n, features, generator=g, dtype=dtype)
    return Data(x, x + noise * torch.randn(n, features, generator=g, dtype=dtype))


def encoder(
    features: int = 8,
    dim: int = 8,
    *,
    hidden: int = 16,
    dropout: float = 0.0,
    norm: str = "none",
    learnable_temperature: bool = False,
    seed: int = 0,
) -> nn.Sequential:
    """The embedding network: accumlab's seeded MLP (Linear (→ norm) → Tanh (→ Dropout), twice,
    then a Linear head to `dim`). `norm="batch"` puts a BatchNorm in each hidden layer.
    `learnable_temperature` adds open_clip's `logit_scale`, a parameter holding log(1/temperature)
    that `contrastive_loss` uses instead of the fixed TEMPERATURE. Lesson 09."""
    dim = positive_int("dim", dim)  # (mlp would call it "outputs")
    _validate.flag("learnable_temperature", learnable_temperature)
    model = mlp(features, hidden, dim, depth=2, norm=norm, dropout=dropout, seed=seed)
    if learnable_temperature:
        start = torch.tensor(math.log(1 / TEMPERATURE), dtype=torch.float64)
        model.register_parameter(LOGIT_SCALE, nn.Parameter(start))
    return model


def info_nce(
    q: torch.Tensor,
    k: torch.Tensor,
    temperature: float = TEMPERATURE,
    *,
    logit_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """InfoNCE with in-batch negatives: row i of q must pick row i of k among all rows of k.
    Cosine similarities ÷ temperature (or × exp(logit_scale), open_clip's learnable form),
    cross-entropy against the diagonal, mean over rows."""
    temperature = positive_float("temperature", temperature)
    tensors = isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)
    if not tensors or q.dim() != 2 or q.shape != k.shape:
        raise ValueError(
            f"q and k must be (n, dim) tensors of one shape, got {describe(q)}, {describe(k)}"
        )
    _validate.tensor("q", q, finite=True)
    _validate.tensor("k", k, finite=True)
    cosine = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).T
    if logit_scale is None:
        logits = cosine / temperature
    else:
        _validate.tensor("logit_scale", logit_scale, dim=0, floating=True, finite=True)
        logits = cosine * logit_scale.exp()
    return F.cross_entropy(logits, torch.arange(len(q), device=q.device))


def logit_scale_of(model: nn.Module) -> torch.Tensor | None:
    """The model's learnable `logit_scale` (see `encoder`), or None for the fixed temperature."""
    return getattr(model, LOGIT_SCALE, None)


def pair_inputs(batch: Data) -> torch.Tensor:
    """Anchors then positives, so ONE forward embeds both (one dropout draw per micro-batch)."""
    require_data(batch, "batch")
    return torch.cat([batch.x, batch.y])


def contrastive_loss(model: nn.Module, batch: Data, temperature: float = TEMPERATURE):
    """InfoNCE of `model`'s embeddings over `batch`: the batch loss naive accumulation averages."""
    z = forward(require_model(model), pair_inputs(batch), "the batch's anchors and positives")
    scale = logit_scale_of(model)
    return info_nce(z[: len(batch)], z[len(batch) :], temperature, logit_scale=scale)


def chance_loss(n: int, dim: int = 8) -> float:
    """InfoNCE when every embedding is the same: all n candidates tie, so the loss is log n.
    The value a batch of n reports for an encoder that tells nothing apart. Lesson 09."""
    n = positive_int("n", n)
    dim = positive_int("dim", dim)
    _validate.fits_in_memory(f"chance_loss(n={n}) (an n × n similarity matrix)", 8 * n * (n + dim))
    same = torch.ones(n, dim, dtype=torch.float64)
    return float(info_nce(same, same))


@one_thread()
def contrastive_sweep(
    model: nn.Module, data: Data, sizes, temperature: float = TEMPERATURE
) -> dict:
    """For each micro-batch size: naive accumulation vs the big batch (gradient cosine, max
    relative error), the negatives each sample sees, the loss a loop logs (the mean of the
    micro-batch losses; at the full size, the big batch's loss) and the chance level log(size).
    Lesson 09."""
    sizes = _validate.positive_ints("sizes", sizes)
    for i, s in enumerate(sizes):
        if s < 2:  # one pair has no negative: its InfoNCE is log 1 = 0, its gradient 0
            raise ValueError(
                f"sizes[{i}] must be at least 2 (a micro-batch of 1 has no in-batch negative, "
                f"so its loss and gradient are 0 and the cosine with the big batch is 0/0), got {s}"
            )

    def loss(m, b):
        return contrastive_loss(m, b, temperature)

    diffs = [accumulation_gap(model, data, s, loss) for s in sizes]
    logged = []
    with torch.no_grad():
        for s in sizes:
            micro = data.micro_batches(s)
            logged.append(sum(float(loss(model, mb)) * len(mb) for mb in micro) / len(data))
    return {
        "sizes": sizes,
        "negatives": [s - 1 for s in sizes],
        "loss": logged,
        "cosine": [d.cosine for d in diffs],
        "max_rel": [d.max_rel for d in diffs],
        "chance": [chance_loss(s) for s in sizes],
    }
