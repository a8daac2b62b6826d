"""Lesson 04 exercises: BatchNorm under micro-batching.

04.1 and 04.2 ask for numbers (any real number type: a whole number of steps, and a momentum
checked to 3 significant digits) about settings the lesson does not compute; 04.3 and 04.4 ask for
functions and observe what they did: which layers are still the original ones, what they compute,
and whether the answer called accumlab's own implementation."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import nn

from ..engine import plain_copy
from . import exercise
from ._answers import Hint, compare, integer, number
from ._batchnorm_models import BATCHNORM as _BATCHNORM
from ._batchnorm_models import DROPPED, dropped
from ._batchnorm_models import INSTANCE as _INSTANCE
from ._batchnorm_models import batchnorm_buffers_changed as _batchnorm_buffers_changed
from ._batchnorm_models import model_with_statistics as _model_with_statistics
from ._batchnorm_models import statistics_or_weights_touched as _statistics_or_weights_touched
from ._batchnorm_models import why_still_training as _why_still_training
from ._draws import pool_seed
from ._ghost_judge import GHOST_CASES, GHOST_TOLERANCE, ghost_reference, wrong_ghost
from ._observe import Modules, Refuse

# 04.1: momentum 0.1, k = 4 forwards per optimizer step: the old running mean keeps 0.9^(4s)
# after s steps; 0.9^36 = 2.25 % and 0.9^40 = 1.48 %, so the first step count below 2 % is 10.
# The real solution, 9.28, rounds to 9: only rounding up gives the answer
FORGET_BELOW = 0.02
STEPS_BELOW = 10


@exercise("04.1", 1, "Optimizer steps (k = 4, momentum 0.1) until the old running mean is < 2 %")
def steps_to_forget(answer):
    forwards = math.log(FORGET_BELOW) / math.log(0.9)  # 37.1 forwards, as a real number
    try:
        value = number(answer)
    except Hint as hint:
        return str(hint)
    if abs(value - forwards / 4) < 0.01:
        return (
            "that solves 0.9^(4s) = 0.02 as a real number; optimizer steps come whole: give the "
            "first step count after which less than 2 % is left"
        )
    if abs(value - forwards) < 0.01:
        return "that is the number of forwards, as a real number; the question asks for steps"
    try:
        steps = integer(answer)
    except Hint as hint:
        return str(hint)
    wrong = {
        38: "that is the number of forwards (or of full-batch steps, one forward each); each "
        "optimizer step here makes 4 forwards in training mode",
        37: "that counts forwards, and one too few: 0.9^37 is still above 2 %",
        9: "after 9 steps 0.9^36 ≈ 2.3 % is left, still above 2 %",
        1: "one step leaves 0.9^4 ≈ 66 %: the old mean fades, but not that fast",
    }
    if steps == STEPS_BELOW:
        return None
    return wrong.get(
        steps,
        "each forward keeps (1 − momentum) of the old running mean, and one optimizer step makes "
        "k = 4 forwards: find the first s with 0.9^(4s) < 0.02",
    )


# 04.2: k = 4 micro-batch updates at m' = 0.05 keep 0.95^4 per optimizer step; one full-batch
# update keeps 1 − m, so m = 1 − 0.95^4 = 0.18549...
MICRO_MOMENTUM = 0.05


@exercise(
    "04.2",
    2,
    "The full-batch momentum that forgets as fast as 4 micro-batch updates at momentum 0.05",
)
def full_batch_momentum(answer):
    m = MICRO_MOMENTUM
    return compare(
        answer,
        1 - (1 - m) ** 4,
        sig=3,
        wrong={
            4 * m: "the updates multiply what is left, they do not add: 4 updates keep "
            "(1 − 0.05)^4 of the old value",
            (1 - m) ** 4: "that is what survives the 4 updates; momentum is the weight of the NEW "
            "batch, 1 minus what survives",
            m: "one full-batch update at 0.05 keeps 0.95, but 4 micro-batch updates keep 0.95^4",
            1 - (1 - m) ** 0.25: "that is the other direction (the micro-batch momentum matching "
            "a full-batch 0.05); here the micro-batch momentum is given",
            m / 4: "the full batch makes fewer updates, so it needs a LARGER momentum, not a "
            "smaller one",
            0.1: "0.1 is PyTorch's default BatchNorm momentum, not this exercise's: solve "
            "1 − m′ = (1 − 0.05)^4 for m′",
            # 0.18549 rounded twice (0.1855, then 0.186): the method is right
            0.186: "right method, rounded twice: round 1 − 0.95^4 once, to 3 significant digits",
        },
        otherwise="one full-batch update keeps 1 − m; four micro-batch updates keep (1 − 0.05)^4: "
        "make them equal",
    )


def _frozen_by_us(model: nn.Module) -> nn.Module:
    model = copy.deepcopy(model)
    for bn in (m for m in model.modules() if isinstance(m, _BATCHNORM)):
        bn.eval()
    return model


# 04.3: the share of its nonzero inputs a dropout layer (p = 0.2) must zero in one training-mode
# forward of 256 × 8 values; the share is 0.2 ± 0.009 (one standard deviation), so real dropout
# lands inside and a silenced one (0) far outside
def _run_freeze(answer, model: nn.Module) -> nn.Module:
    """Call the learner's freeze on `model`; check it returned that model with its own layers."""
    before = Modules(model)
    # finding every BatchNorm kind is half the exercise: the package's finder is refused too
    with Refuse(
        "al.batchnorm.freeze_batchnorm",
        "al.batchnorm.batchnorm_layers",
        "al.exercises.lesson04._frozen_by_us",  # the checker's own reference
    ):
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
    for kind in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm, nn.Dropout):
        gone = before.sentence(frozen, kind)
        if gone:
            raise Hint(
                f"{gone}: freezing keeps every layer where it is and switches only the BatchNorm "
                "layers to eval mode; a replaced layer is not frozen, it is gone"
            )
    return frozen


@exercise("04.3", 2, "Freeze BatchNorm: accumulation exact (without dropout), dropout kept active")
def freeze(answer):
    from ..batchnorm.layers import batchnorm_data
    from ..batchnorm.stats import batch_gradient_diff

    if not callable(answer):
        return "answer must be a function taking a model and returning it"
    model = _model_with_statistics(dropout=0.2)
    before = {n: b.clone() for n, b in model.named_buffers()}
    rates = {n: m.p for n, m in model.named_modules() if isinstance(m, nn.Dropout)}
    frozen = _run_freeze(answer, model)
    said = _statistics_or_weights_touched(frozen, before)  # what the answer did, before any forward
    if said:
        return said
    training = [
        f"{n} ({type(m).__name__})"
        for n, m in frozen.named_modules()
        if isinstance(m, _BATCHNORM) and m.training
    ]
    if training:
        # a forward of the answer's own (F.batch_norm with training=False, say) is not a mode
        patched = any("forward" in vars(m) for m in frozen.modules() if isinstance(m, _BATCHNORM))
        return f"BatchNorm layers still in training mode: {', '.join(training)}; " + (
            "their forward was replaced: switch each layer's mode with .eval() instead (a replaced "
            "forward is not what this exercise asks)"
            if patched
            else f"they would normalise with micro-batch statistics ({_why_still_training(frozen)})"
        )
    if any(not m.training for m in frozen.modules() if isinstance(m, nn.Dropout)):
        return "only the BatchNorm layers should change mode; dropout should keep regularising"
    now = dict(frozen.named_modules())
    changed = [f"{n}: p {p} → {now[n].p}" for n, p in rates.items() if now[n].p != p]
    if changed:
        return f"your answer changed dropout's rate ({', '.join(changed)}); it should keep regularising"
    switched = [
        f"{n} ({type(m).__name__})"
        for n, m in frozen.named_modules()
        if isinstance(m, _INSTANCE) and not m.training
    ]
    if switched:
        return (
            f"your answer also switched {', '.join(switched)} to eval mode: it normalises each "
            "sample on its own, so accumulation was already exact there, and in eval mode it "
            "would use its running statistics instead. Switch only the BatchNorm layers"
        )
    dropouts = {n: m for n, m in model.named_modules() if isinstance(m, nn.Dropout)}
    seen = dropped(frozen, dropouts)
    if _batchnorm_buffers_changed(frozen, before):
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
    layers = {n: m for n, m in plain.named_modules() if isinstance(m, _BATCHNORM)}
    frozen = _run_freeze(answer, plain)
    x, called = batchnorm_data(16).x, set()
    # the original layers must run: one kept as an unused child of a replacement is not frozen
    handles = [m.register_forward_hook(lambda *_, n=n: called.add(n)) for n, m in layers.items()]
    try:
        with torch.no_grad():
            same = torch.allclose(frozen(x), expected(x), rtol=1e-9, atol=1e-12)
    finally:
        for h in handles:
            h.remove()
    if set(layers) - called:
        return (
            f"the BatchNorm layers {sorted(set(layers) - called)} were not called in a forward "
            "of the model: keep each one where it is and switch only its mode"
        )
    if not same:
        return (
            "the frozen model computes something else than BatchNorm normalising with its running "
            "statistics (its scale γ and shift β included): only the mode should change"
        )
    if batch_gradient_diff(frozen, batchnorm_data(16), 4).max_rel > 1e-12:
        return "accumulated and full-batch gradients still differ"
    return None


GHOST_SEEDS = (4, 6, 7, 11, 15, 16, 18, 19, 20, 29, 34, 37, 46, 47, 48, 52, 53, 54, 56, 58, 59)


@exercise(
    "04.4", 3, "Ghost batch norm by hand: normalise each chunk of rows with its own statistics"
)
def ghost(answer):
    if not callable(answer):
        return "answer must be a function (x, ghost_batch_size) -> normalised x"
    # inputs drawn for every check from seeds on which float32 right answers pass and the
    # one-pass float32 variance and a bfloat16 computation fail (tests/test_exercises.py)
    g = torch.Generator().manual_seed(pool_seed(GHOST_SEEDS))
    for rows, size in GHOST_CASES:
        # columns of very different spread: the last one's variance (1e-4) is close to eps, and
        # centred on 0 so that a float32 computation keeps its digits
        shift = torch.tensor([3.0, -1.0, 0.0], dtype=torch.float64)
        scale = torch.tensor([2.0, 1.0, 0.01], dtype=torch.float64)
        x = shift + scale * torch.randn(rows, 3, generator=g, dtype=torch.float64)
        with Refuse(
            "al.batchnorm.GhostBatchNorm1d",
            "al.batchnorm.GhostBatchNorm1d.forward",  # an instance made without __init__
            "al.batchnorm.ghost_batchnorm",
            "al.batchnorm.micro_batch_stats",
            "al.batchnorm.layer_statistics",
            "al.batchnorm.normalized_values",
            "al.exercises._ghost_judge.ghost_reference",  # the checker's own reference
            "al.exercises._ghost_judge._normalised",
        ):
            try:
                got = answer(x.clone(), size)
            except (RuntimeError, ValueError) as err:  # torch's or numpy's reshape of uneven rows
                if not (rows % size and "shape" in str(err)):
                    raise
                short = f"the last chunk of {rows} rows in chunks of {size} has {rows % size}"
                raise Hint(f"{short}: x does not reshape into equal chunks ({err})") from err
        if isinstance(got, np.ndarray) and got.dtype.kind == "f":
            # a numpy computation's result, read as a tensor; a float type torch lacks
            # (longdouble) is read in float64, which holds every digit the check needs
            wide = got.dtype not in (np.float16, np.float32, np.float64)
            got = torch.from_numpy(got.astype(np.float64) if wide else got)
        if not isinstance(got, torch.Tensor) or got.shape != x.shape:
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            return f"return a tensor (or numpy array) shaped like x {tuple(x.shape)}, got {shape}"
        got = plain_copy(got)  # no subclass of the answer's takes part in the comparisons
        if got.is_complex() or got.is_meta:  # a cast would drop the imaginary part silently
            return (
                f"return real numbers computed on the CPU, got a {got.dtype} tensor on {got.device}"
            )
        returned = got.dtype
        got = got.to(torch.float64)
        # computed only now: no frame the answer ran under held it
        expected = ghost_reference(x, size)
        if not torch.allclose(got, expected, rtol=0, atol=GHOST_TOLERANCE):
            return wrong_ghost(got, returned, x, size)
    return None
