"""Lesson 04 exercises: BatchNorm under micro-batching."""

from __future__ import annotations

import copy

import torch
from torch import nn

from . import exercise


def _number(answer) -> float:
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        raise ValueError(f"answer must be a number, got {type(answer).__name__}")
    return float(answer)


@exercise(
    "04.1", 1, "What survives of the old running mean after k = 4 micro-batches (momentum 0.1)?"
)
def old_weight(answer):
    value = _number(answer)
    if abs(value - 0.9**4) <= 1e-6:
        return None
    if abs(value - 0.9) <= 1e-6:
        return (
            "that is one update; count how many forwards in training mode one optimizer step makes"
        )
    if abs(value - (1 - 4 * 0.1)) <= 1e-6:
        return "each update multiplies the old value by a factor; the factors do not add up"
    return "each forward keeps a fraction (1 − momentum) of the running mean it found"


@exercise(
    "04.2",
    2,
    "Which momentum makes 4 micro-batch updates decay the old statistics like one update at 0.1?",
)
def matched(answer):
    value = _number(answer)
    if abs((1 - value) ** 4 - 0.9) <= 1e-9:
        return None
    if abs(value - 0.1 / 4) <= 1e-9:
        return "close, but dividing by k is not exact: write what survives after 4 updates and solve for m'"
    return "you need (1 − m')^4 to equal what one update at momentum 0.1 leaves"


def _grads_match(model: nn.Module) -> float:
    from ..batchnorm.layers import batchnorm_data
    from ..batchnorm.stats import batch_gradient_diff

    return batch_gradient_diff(model, batchnorm_data(16), 4).max_rel


@exercise(
    "04.3", 2, "Freeze BatchNorm: a function that makes accumulation exact but keeps dropout active"
)
def freeze(answer):
    from ..batchnorm.layers import batchnorm_layers
    from ..models import mlp

    if not callable(answer):
        return "answer must be a function taking a model and returning it"
    model = mlp(8, 8, 3, norm="batch", dropout=0.2, seed=0)
    before = {n: b.clone() for n, b in model.named_buffers()}
    frozen = answer(copy.deepcopy(model))
    if not isinstance(frozen, nn.Module):
        return "your function must return the model"
    if any(bn.training for bn in batchnorm_layers(frozen)):
        return "a BatchNorm layer is still in training mode: it would normalise with micro-batch statistics"
    if any(isinstance(m, nn.Dropout) and not m.training for m in frozen.modules()):
        return "only the BatchNorm layers should change mode; dropout should keep regularising"
    frozen(torch.randn(6, 8, dtype=torch.float64))
    if any(not torch.equal(before[n], b) for n, b in frozen.named_buffers()):
        return "the running statistics changed during a forward: the layer is not frozen"
    no_dropout = answer(mlp(8, 8, 3, norm="batch", seed=0))
    if _grads_match(no_dropout) > 1e-12:
        return "accumulated and full-batch gradients still differ"
    return None


@exercise(
    "04.4", 3, "Ghost batch norm by hand: normalise each chunk of rows with its own statistics"
)
def ghost(answer):
    from ..batchnorm.remedies import GhostBatchNorm1d

    if not callable(answer):
        return "answer must be a function (x, ghost_batch_size) -> normalised x"
    g = torch.Generator().manual_seed(4)
    for rows, size in ((12, 4), (10, 5), (8, 8)):
        x = 3 + 2 * torch.randn(rows, 3, generator=g, dtype=torch.float64)
        layer = GhostBatchNorm1d(3, size, affine=False).to(torch.float64).train()
        expected = layer(x)
        got = answer(x.clone(), size)
        if not isinstance(got, torch.Tensor) or got.shape != x.shape:
            return f"return a tensor shaped like x {tuple(x.shape)}"
        if not torch.allclose(got, expected, atol=1e-10):
            if torch.allclose(
                got, (x - x.mean(0)) / (x.var(0, unbiased=False) + 1e-5).sqrt(), atol=1e-10
            ):
                if size < rows:
                    return (
                        "those are the whole batch's statistics; each chunk of rows needs its own"
                    )
            return "use each chunk's mean and its biased variance (÷ n, as BatchNorm does), with eps = 1e-5"
    return None
