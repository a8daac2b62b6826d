"""Lesson 02 exercises: .grad accumulation and zeroing."""

from __future__ import annotations

import copy

import torch

from ..data import classic_data, regression_data
from ..engine import Recipe, params_of, run
from ..models import ScalarModel, mlp
from ..reference import full_batch_grads
from . import exercise


@exercise("02.1", 1, "Predict the gradient after the second sample, without halving the loss")
def _predict_unhalved(answer):
    # classic example, one sample at a time, loss NOT divided by 2: .grad after both samples
    if not isinstance(answer, (int, float)) or isinstance(answer, bool):
        return "answer with a number"
    data, model = classic_data(), ScalarModel()
    trace = run(Recipe(1, 2, normalization="none"), model, data, optimizer=None)
    # `not <=`: NaN compares False both ways, and `abs(nan - x) > tol` would call it correct
    if not abs(answer - float(trace.window_grads[0]["w"])) <= 1e-9:
        return "each sample's gradient is -2·x·(y - w·x); without the 1/2 nothing averages them"
    return None


@exercise("02.2", 2, "Write an accumulation loop that leaves the full-batch gradient in .grad")
def _accumulate(answer):
    # answer(model, data, micro_batch_size) → fills model's .grad; data splits evenly
    data = regression_data(12, 3, seed=11)
    model = mlp(3, 4, 1, depth=1, seed=11)
    mine = copy.deepcopy(model)
    answer(mine, data, 4)
    full = full_batch_grads(model, data)
    for name, p in mine.named_parameters():
        if p.grad is None:
            return f"{name}.grad is None: did every micro-batch call backward?"
        ratio = float(p.grad.norm() / full[name].norm())
        if abs(ratio - 3) < 1e-6:
            return "the gradient is 3× too large: each micro-batch's mean loss needs a scale"
        if not torch.allclose(p.grad, full[name], rtol=1e-10, atol=1e-12):
            return "compare your .grad with al.full_batch_grads(model, data) — zeroing inside the loop?"
    return None


@exercise("02.3", 3, "Fix the loop that zeroes at the top of every iteration")
def _fixed_epoch(answer):
    # answer(model, optimizer, data, micro_batch_size, k) trains one epoch with a correct
    # accumulation loop (len(data) is a multiple of micro_batch_size * k)
    data = regression_data(24, 2, seed=12)
    model = mlp(2, 3, 1, depth=1, seed=12)
    mine = copy.deepcopy(model)
    opt = torch.optim.SGD(mine.parameters(), lr=0.05)
    answer(mine, opt, data, 3, 4)
    want = run(Recipe(3, 4), model, data, lr=0.05).params[-1]
    got = params_of(mine)
    if all(torch.equal(got[n], p.detach()) for n, p in model.named_parameters()):
        return "the parameters did not change: call optimizer.step() once per k micro-batches"
    if not all(torch.allclose(got[n], want[n], rtol=1e-10, atol=1e-12) for n in want):
        return "after one epoch the weights differ from the reference: zero once per window, step once per window, divide by k"
    return None
