"""Lesson 05 exercises: the optimizer state of a 16-bit model, choosing k from the two moments of a
step, and a loop that keeps no graph alive."""

from __future__ import annotations

import copy

import torch

from . import exercise
from ._answers import Hint, compare, integers, number
from ._observe import Observe, Refuse, forwards_phrase

# 05.1: a model of 3,000,000 bfloat16 parameters; Adam's moments are zeros_like(param)
PARAMS_05_1 = 3_000_000
# 05.2's numbers, given in the notebook
FLOOR = 3_000_000  # bytes during optimizer.step(): parameters, gradients, state, step temporaries
RESTING_WITH_GRADS = 2_400_000  # bytes during a forward: the same less the step's temporaries
PER_SAMPLE = 40_000  # bytes one sample adds while its micro-batch is on the device
BUDGET = 5_000_000
GLOBAL_BATCH = 192


@exercise("05.1", 1, "Adam's state for a 16-bit model")
def adam_state(answer):
    two_bytes = 2 * PARAMS_05_1
    return compare(
        answer,
        2 * two_bytes,
        rel=1e-6,
        wrong={
            4 * 2 * PARAMS_05_1: "Adam's moments are created with torch.zeros_like(param): which "
            "dtype do they get for bfloat16 parameters?",
            two_bytes: "that is one buffer; Adam keeps exp_avg and exp_avg_sq",
            3 * two_bytes: "only exp_avg and exp_avg_sq are the optimizer's state: the "
            "parameters and their .grad are not",
        },
        otherwise="two buffers per parameter, each the shape and dtype of the parameter",
    )


def _largest(room: int) -> int:
    """The largest divisor of the global batch whose samples fit in `room` bytes."""
    return max(
        m for m in range(1, GLOBAL_BATCH + 1) if GLOBAL_BATCH % m == 0 and m * PER_SAMPLE <= room
    )


@exercise("05.2", 2, "Choose the micro-batch size and k from the two moments")
def choose(answer):
    mb, k = integers(answer, 2)
    if mb < 1 or k < 1:
        raise Hint(f"a micro-batch size and k are at least 1, got ({mb}, {k})")
    if mb * k != GLOBAL_BATCH:
        raise Hint(
            f"micro_batch_size × k must equal the global batch of {GLOBAL_BATCH}, got {mb * k}"
        )
    need = RESTING_WITH_GRADS + mb * PER_SAMPLE
    if need > BUDGET:
        raise Hint(
            f"during a forward, {mb} samples need {RESTING_WITH_GRADS:,} + {mb} × {PER_SAMPLE:,} = "
            f"{need:,} bytes, over the budget"
        )
    if mb == _largest(BUDGET - FLOOR) < _largest(BUDGET - RESTING_WITH_GRADS):
        raise Hint(
            "it fits, but so does a larger micro-batch: the step's temporaries exist only during "
            "optimizer.step(), when no micro-batch's data or activations do — check each of the "
            "two moments against the budget on its own"
        )
    if mb < _largest(BUDGET - RESTING_WITH_GRADS):
        raise Hint(
            "it fits, but a larger micro-batch also fits: fewer, larger micro-batches use the "
            "hardware better"
        )
    return None


def _task():
    from ..data import regression_data
    from ..models import mlp

    model = mlp(features=8, hidden=32, outputs=1, depth=2, seed=1, dtype=torch.float64)
    data = regression_data(n=32, features=8, outputs=1, seed=1, dtype=torch.float64)
    return model, data


@exercise("05.3", 3, "Accumulate without keeping graphs alive")
def accumulate_lean(answer):
    from ..reference import full_batch_grads

    if not callable(answer):
        raise Hint("give a function accumulate(model, micro_batches)")
    model, data = _task()
    micro = data.micro_batches(8)
    mine = copy.deepcopy(model)
    with (
        Refuse("al.accumulated_grads", "al.full_batch_grads", "al.run", "al.memory.train_step"),
        Observe(mine) as seen,
    ):
        result = answer(mine, micro)
    if isinstance(result, torch.Tensor) and result.grad_fn is not None:
        raise Hint(
            "return a number, not a tensor with a graph: it keeps its graph, and every graph it "
            "was added to, alive (.item() or .detach())"
        )
    try:
        value = number(result)
    except Hint:
        raise Hint(
            f"return the mean loss over all micro-batches as a number, got {type(result).__name__}"
        ) from None
    if seen.rows != [8] * 4:
        raise Hint(
            f"your answer ran {seen.forwards_phrase()}; accumulation runs "
            f"{forwards_phrase([8] * 4)}, one per micro-batch"
        )
    if seen.backwards != 4:
        raise Hint(
            f"your answer ran {seen.backwards_phrase()}: a backward per micro-batch frees its "
            "graph before the next forward (4 expected)"
        )
    if seen.peak_graphs > 1:
        raise Hint(
            f"the gradient may be right, but {seen.graphs_phrase()}: one micro-batch's graph "
            "at a time is the point (is something holding a loss with its graph?)"
        )
    with torch.no_grad():
        full_loss = float(torch.nn.functional.mse_loss(model(data.x), data.y))
    hint = compare(
        value,
        full_loss,
        rel=1e-9,
        otherwise="the returned loss should be the mean over all samples (the mean of the k "
        "micro-batch means)",
    )
    if hint:
        raise Hint(hint)
    ref = full_batch_grads(model, data, loss="mse")
    got = dict(mine.named_parameters())
    if any(got[n].grad is None for n in ref):
        raise Hint("after your function every parameter should hold a .grad")
    if not all(torch.allclose(got[n].grad, ref[n], rtol=1e-9, atol=1e-12) for n in ref):
        raise Hint(
            "the accumulated gradient differs from the full batch's (checked to a relative "
            "1e-9): what is each micro-batch's loss divided by?"
        )
    return None
