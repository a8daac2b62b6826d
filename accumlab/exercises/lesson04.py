"""Lesson 04 exercises: BatchNorm under micro-batching.

04.1 and 04.2 ask for numbers (any real number type, checked to 3 significant digits); 04.3 and
04.4 ask for functions and observe what they did: which layers are still the original ones, what
they compute, and whether the answer called accumlab's own implementation.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from . import exercise
from ._answers import Hint, compare
from ._observe import Modules, Refuse

_BATCHNORM = nn.modules.batchnorm._BatchNorm


@exercise(
    "04.1",
    1,
    "What fraction of the old running mean survives k = 4 micro-batch forwards (momentum 0.1)?",
)
def old_weight(answer):
    return compare(
        answer,
        0.9**4,
        sig=3,
        wrong={
            0.9: "that is one update; count the forwards in training mode one optimizer step makes",
            1
            - 4
            * 0.1: "each update multiplies the old value by a factor; the factors do not add up",
            0.9**8: "that is k = 8, the lesson's example; this step accumulates 4 micro-batches",
            1 - 0.9**4: "that is the weight all the new micro-batches carry together; the question "
            "asks what is left of the old running mean",
            0.1**4: "momentum is the weight of the NEW batch; the old value keeps 1 − momentum",
        },
        otherwise="each forward keeps a fraction (1 − momentum) of the running mean it found",
    )


@exercise(
    "04.2",
    2,
    "Which momentum makes 4 micro-batch updates decay the old statistics like one update at 0.1?",
)
def matched(answer):
    return compare(
        answer,
        1 - 0.9**0.25,
        sig=3,
        wrong={
            0.1 / 4: "dividing by k is close but not exact: write what survives after 4 updates, "
            "(1 − m')^4, and solve (1 − m')^4 = 0.9 for m'",
            0.1: "with momentum 0.1, four updates keep 0.9^4 of the old value, not 0.9",
            1 - 0.9 ** (1 / 8): "that is the matched momentum for k = 8, the lesson's example",
            0.9
            ** 0.25: "that is what survives each update, 1 − m'; momentum is the new batch's weight",
            1 - 0.9**4: "that solves the wrong equation: you need (1 − m')^4 = 0.9",
        },
        otherwise="you need (1 − m')^4 to equal 0.9, what one update at momentum 0.1 leaves",
    )


def _model_with_statistics(dropout: float | None) -> nn.Module:
    """The lesson's classifier with running statistics, scales and shifts that are not the initial
    0, 1, 1, 0: BatchNorm in eval mode is then visibly different from an identity."""
    from ..models import mlp

    kwargs = {"dropout": dropout} if dropout else {}
    model = mlp(8, 8, 3, norm="batch", seed=0, **kwargs)
    g = torch.Generator().manual_seed(40)
    with torch.no_grad():
        for bn in (m for m in model.modules() if isinstance(m, _BATCHNORM)):
            shape = bn.running_mean.shape
            bn.running_mean.copy_(torch.randn(shape, generator=g, dtype=torch.float64))
            bn.running_var.copy_(0.5 + torch.rand(shape, generator=g, dtype=torch.float64))
            bn.weight.copy_(0.5 + torch.rand(shape, generator=g, dtype=torch.float64))
            bn.bias.copy_(torch.randn(shape, generator=g, dtype=torch.float64))
    return model


def _frozen_by_us(model: nn.Module) -> nn.Module:
    model = copy.deepcopy(model)
    for bn in (m for m in model.modules() if isinstance(m, _BATCHNORM)):
        bn.eval()
    return model


# 04.3: the share of its nonzero inputs a dropout layer (p = 0.2) must zero in one training-mode
# forward of 256 × 8 values; the share is 0.2 ± 0.009 (one standard deviation), so real dropout
# lands inside and a silenced one (0) far outside
DROPPED = (0.1, 0.3)


def _dropped(model: nn.Module, dropouts: dict) -> dict:
    """One forward of `model` (grad on, as in training); for each original dropout layer, the
    share of its nonzero inputs it zeroed and whether it scaled the rest by 1/(1 − p). Read by
    forward hooks on the layers themselves, around whatever the answer did to their forward."""
    seen: dict = {}

    def record(name):
        def hook(module, args, out):
            x = args[0].detach()
            nonzero = x != 0
            kept = nonzero & (out.detach() != 0)
            p = module.p
            seen[name] = (
                float((nonzero & ~kept).sum()) / max(int(nonzero.sum()), 1),
                bool(torch.allclose(out.detach()[kept], x[kept] / (1 - p), rtol=1e-9, atol=0)),
            )

        return hook

    handles = [m.register_forward_hook(record(n)) for n, m in dropouts.items()]
    try:
        with torch.random.fork_rng():
            torch.manual_seed(43)
            model(torch.randn(256, 8, dtype=torch.float64))
    finally:
        for h in handles:
            h.remove()
    missing = set(dropouts) - set(seen)
    if missing:
        raise Hint(
            f"the dropout layers {sorted(missing)} were not called in a forward of the model: "
            "keep every layer where it is"
        )
    return seen


def _run_freeze(answer, model: nn.Module) -> nn.Module:
    """Call the learner's freeze on `model`; check it returned that model with its own layers."""
    before = Modules(model)
    with Refuse("al.batchnorm.freeze_batchnorm"):
        frozen = answer(model)
    if frozen is None:
        raise Hint("your function returned None: return the model it was given")
    if not isinstance(frozen, nn.Module):
        raise Hint(f"your function must return the model, got {type(frozen).__name__}")
    if frozen is not model:
        raise Hint(
            "your function returned a different model object: freeze the layers of the model "
            "it was given, in place, and return that model"
        )
    for kind in (nn.BatchNorm1d, nn.Dropout):
        gone = before.sentence(frozen, kind)
        if gone:
            raise Hint(
                f"{gone}: freezing keeps every layer where it is and switches only the BatchNorm "
                "layers to eval mode; a replaced layer is not frozen, it is gone"
            )
    return frozen


@exercise(
    "04.3", 2, "Freeze BatchNorm: a function that makes accumulation exact but keeps dropout active"
)
def freeze(answer):
    from ..batchnorm.layers import batchnorm_data
    from ..batchnorm.stats import batch_gradient_diff

    if not callable(answer):
        return "answer must be a function taking a model and returning it"
    model = _model_with_statistics(dropout=0.2)
    before = {n: b.clone() for n, b in model.named_buffers()}
    rates = {n: m.p for n, m in model.named_modules() if isinstance(m, nn.Dropout)}
    frozen = _run_freeze(answer, model)
    if any(bn.training for bn in frozen.modules() if isinstance(bn, _BATCHNORM)):
        return "a BatchNorm layer is still in training mode: it would normalise with micro-batch statistics"
    if any(not m.training for m in frozen.modules() if isinstance(m, nn.Dropout)):
        return "only the BatchNorm layers should change mode; dropout should keep regularising"
    now = dict(frozen.named_modules())
    changed = [f"{n}: p {p} → {now[n].p}" for n, p in rates.items() if now[n].p != p]
    if changed:
        return f"your answer changed dropout's rate ({', '.join(changed)}); dropout should keep regularising as before"
    dropouts = {n: m for n, m in model.named_modules() if isinstance(m, nn.Dropout)}
    seen = _dropped(frozen, dropouts)
    if any(not torch.equal(before[n], b) for n, b in frozen.named_buffers()):
        return "the running statistics changed during a forward: the layer is not frozen"
    for name, (fraction, scaled) in seen.items():
        if not DROPPED[0] <= fraction <= DROPPED[1] or not scaled:
            return (
                f"dropout layer {name} dropped {fraction:.0%} of its inputs in a training-mode "
                f"forward (rate p = {rates[name]}{'' if scaled else ', kept ones not scaled by 1/(1 − p)'}"
                "): dropout must keep regularising — switch only the BatchNorm layers to eval mode"
            )

    plain = _model_with_statistics(dropout=None)
    expected = _frozen_by_us(plain)
    frozen = _run_freeze(answer, plain)
    x = batchnorm_data(16).x
    with torch.no_grad():
        same = torch.allclose(frozen(x), expected(x), rtol=1e-9, atol=1e-12)
    if not same:
        return (
            "the frozen model computes something else than BatchNorm normalising with its running "
            "statistics (its scale γ and shift β included): only the mode should change"
        )
    if batch_gradient_diff(frozen, batchnorm_data(16), 4).max_rel > 1e-12:
        return "accumulated and full-batch gradients still differ"
    return None


def _ghost_reference(x: torch.Tensor, size: int) -> torch.Tensor:
    """Each chunk of `size` rows normalised with its own mean and biased variance (eps = 1e-5)."""
    return torch.cat(
        [(c - c.mean(0)) / (c.var(0, unbiased=False) + 1e-5).sqrt() for c in x.split(size)]
    )


# rows, ghost batch size; 10/4 ends with 2 rows; 12/5 is where x.chunk(ceil(12 / 5)) = [4, 4, 4]
# differs from x.split(5) = [5, 5, 2]
GHOST_CASES = ((12, 4), (10, 5), (8, 8), (10, 4), (12, 5))
GHOST_TOLERANCE = 1e-6  # absolute, on values of order 1: a float32 computation passes too


@exercise(
    "04.4", 3, "Ghost batch norm by hand: normalise each chunk of rows with its own statistics"
)
def ghost(answer):
    if not callable(answer):
        return "answer must be a function (x, ghost_batch_size) -> normalised x"
    g = torch.Generator().manual_seed(4)
    for rows, size in GHOST_CASES:
        # columns of very different spread: the last one's variance (1e-4) is close to eps, and
        # centred on 0 so that a float32 computation keeps its digits
        shift = torch.tensor([3.0, -1.0, 0.0], dtype=torch.float64)
        scale = torch.tensor([2.0, 1.0, 0.01], dtype=torch.float64)
        x = shift + scale * torch.randn(rows, 3, generator=g, dtype=torch.float64)
        expected = _ghost_reference(x, size)
        with Refuse("al.batchnorm.GhostBatchNorm1d", "al.batchnorm.ghost_batchnorm"):
            got = answer(x.clone(), size)
        if not isinstance(got, torch.Tensor) or got.shape != x.shape:
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            return f"return a tensor shaped like x {tuple(x.shape)}, got {shape}"
        got = got.detach().to(torch.float64)
        if torch.allclose(got, expected, rtol=0, atol=GHOST_TOLERANCE):
            continue
        where = f"(checked to ± {GHOST_TOLERANCE:g} on {rows} rows in chunks of {size})"
        whole = (x - x.mean(0)) / (x.var(0, unbiased=False) + 1e-5).sqrt()
        if size < rows and torch.allclose(got, whole, rtol=0, atol=GHOST_TOLERANCE):
            return (
                f"those are the whole batch's statistics; each chunk of rows needs its own {where}"
            )
        unbiased = torch.cat(
            [(c - c.mean(0)) / (c.var(0, unbiased=True) + 1e-5).sqrt() for c in x.split(size)]
        )
        if torch.allclose(got, unbiased, rtol=0, atol=GHOST_TOLERANCE):
            return (
                f"BatchNorm normalises with the biased variance (÷ n), not the unbiased one {where}"
            )
        pieces = x.chunk(-(-rows // size))  # as many near-equal pieces as split gives
        if len(pieces) == len(x.split(size)) and torch.allclose(
            got,
            torch.cat([(c - c.mean(0)) / (c.var(0, unbiased=False) + 1e-5).sqrt() for c in pieces]),
            rtol=0,
            atol=GHOST_TOLERANCE,
        ):
            return (
                f"torch.chunk(n) cuts x into n pieces of nearly equal size ({[len(c) for c in pieces]}"
                f"), not into chunks of {size} rows with a shorter last one {where}"
            )
        return f"use each chunk's mean and its biased variance (÷ n), with eps = 1e-5 {where}"
    return None
