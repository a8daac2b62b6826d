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


@exercise("02.3", 3, "Make zero_grad() and step() on every iteration correct, as Accelerate does")
def _window_optimizer(answer):
    # answer(optimizer, k) -> an object with step() and zero_grad(); the checker runs the loop
    #     for mb in micro_batches: (loss(mb) / k).backward(); opt.step(); opt.zero_grad()
    # for 2 epochs (24 samples, micro-batch 3, k = 4) and compares with al.run(Recipe(3, 4))
    import torch.nn.functional as F

    if not callable(answer):
        return "answer with a class or function taking (optimizer, k) and returning a wrapper"
    data = regression_data(24, 2, seed=12)
    model = mlp(2, 3, 1, depth=1, seed=12)
    mine = copy.deepcopy(model)
    wrapped = answer(torch.optim.SGD(mine.parameters(), lr=0.05), 4)
    if not (
        callable(getattr(wrapped, "step", None)) and callable(getattr(wrapped, "zero_grad", None))
    ):
        return "the wrapper needs step() and zero_grad() methods"
    for _ in range(2):
        for mb in data.micro_batches(3):
            (F.mse_loss(mine(mb.x), mb.y) / 4).backward()
            wrapped.step()
            wrapped.zero_grad()
    got = params_of(mine)
    want = run(Recipe(3, 4), model, data, lr=0.05, epochs=2).params[-1]
    every = run(Recipe(3, 1), model, data, lr=0.05 / 4, epochs=2).params[-1]

    def same(a, b):
        return all(torch.allclose(a[n], b[n], rtol=1e-10, atol=1e-12) for n in b)

    if same(got, params_of(model)):
        return (
            "the parameters never changed: step() must reach the optimizer once per k micro-batches"
        )
    if same(got, every):
        return "every call reaches the optimizer: step() and zero_grad() must act only when a window of k micro-batches is complete"
    if not same(got, want):
        return "count the micro-batches in step(); act (step, then zero) only when the count is a multiple of k"
    return None
