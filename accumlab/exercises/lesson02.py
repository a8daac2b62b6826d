"""Lesson 02 exercises: .grad accumulation and zeroing."""

from __future__ import annotations

import copy

import torch

from ..data import classic_data, regression_data
from ..engine import Recipe, params_of, run
from ..models import ScalarModel, mlp
from ..reference import full_batch_grads
from . import exercise
from ._answers import Hint, compare
from ._observe import Added, Observe, Refuse, Spy, forwards_phrase, multiple_of


@exercise("02.1", 1, "w after the step, without halving the loss")
def _predict_unhalved(answer):
    # classic example, one sample at a time, loss NOT divided by 2, SGD lr 0.01: w after the step
    trace = run(Recipe(1, 2, normalization="none"), ScalarModel(w=1.0), classic_data(), lr=0.01)
    expected = float(trace.params[-1]["w"])  # 1 - 0.01 · (-32 - 8) = 1.4
    return compare(
        answer,
        expected,
        sig=3,
        wrong={
            1.2: "that is the step with each loss divided by 2 (the full-batch step)",
            -40.0: "that is w.grad after both samples; the exercise asks for w after the step",
            0.6: "SGD moves w against the gradient: w − lr · grad",
            1.0: "that is w before the step: the two backward passes add into w.grad, and the "
            "step moves w by −lr · w.grad",
        },
        otherwise="add the two samples' gradients, −2·x·(y − w·x) each, then w − lr · grad",
    )


# what an answer must not call: accumlab's own ways of getting the full-batch gradient
REFUSED = ("al.full_batch_grads", "al.accumulated_grads", "al.accumulation_progress", "al.run")


@exercise("02.2", 2, "Write an accumulation loop that leaves the full-batch gradient in .grad")
def _accumulate(answer):
    # answer(model, data, micro_batch_size) → fills model's .grad; data splits evenly. Observed:
    # the forwards and the rows each received, the backward passes, the graphs alive at once.
    data = regression_data(12, 3, seed=11)
    model = mlp(3, 4, 1, depth=1, seed=11)
    mine = copy.deepcopy(model)
    size, k = 4, 3
    with Refuse(*REFUSED), Observe(mine, inputs=True) as seen, Added(mine) as added:
        answer(mine, data, size)
    want = forwards_phrase([size] * k)
    rows = [c.rows for c in seen.forwards if c.graph]  # a forward under no_grad (a log) is free
    if rows != [size] * k:
        raise Hint(
            f"your answer ran {forwards_phrase(rows)} with a graph; accumulation runs {want}, "
            "one per micro-batch, each recording its graph"
        )
    fed = seen.fed(data.micro_batches(size))  # the rows: a reshaped batch has the right count
    if fed:
        raise Hint(f"{fed}: accumulation feeds each micro-batch's own x to the model, once")
    if seen.backwards != k:
        raise Hint(
            f"your answer ran {seen.backwards_phrase()}; accumulation calls backward once per "
            f"micro-batch ({k}), each adding into .grad"
        )
    if seen.peak_graphs > 1:
        raise Hint(
            f"{seen.graphs_phrase()}: call backward on each micro-batch before the next forward, "
            "so only one graph is alive at a time (lesson 01)"
        )
    if added.foreign_forwards:
        raise Hint(
            "your answer ran a forward with a graph through another model's layers (a copy or "
            "a twin of `model`?): accumulate on `model` itself, one micro-batch at a time"
        )
    from ..compare import flatten

    vectors = added.vectors()
    if any(not bool(v.any()) for v in vectors):
        raise Hint(
            "a backward pass added nothing to .grad: each micro-batch's backward must carry its "
            "own share of the full-batch gradient"
        )
    got = {n: p.grad for n, p in mine.named_parameters()}
    if any(g is None for g in got.values()) or not multiple_of(flatten(got), sum(vectors)):
        raise Hint(
            ".grad ended as something other than what your backward passes added (or a multiple "
            "of it): let backward write the gradient"
        )
    full = full_batch_grads(model, data)
    for name, p in mine.named_parameters():
        if p.grad is None:
            raise Hint(f"{name}.grad is None: did every micro-batch call backward?")
        ratio = float(p.grad.norm() / full[name].norm())
        if abs(ratio - k) < 1e-6:
            raise Hint(
                f"the gradient is {k}× too large: each micro-batch's mean loss needs a scale"
            )
        if not torch.allclose(p.grad, full[name], rtol=1e-10, atol=1e-12):
            raise Hint(
                f"{name}.grad differs from the full-batch gradient — zeroing inside the loop, or "
                "another scale?"
            )
    return None


@exercise("02.3", 3, "Make zero_grad() and step() on every iteration correct, as Accelerate does")
def _window_optimizer(answer):
    # answer(optimizer, k) -> an object with step() and zero_grad(); the checker runs the loop
    #     for mb in micro_batches: (loss(mb) / k).backward(); opt.step(); opt.zero_grad()
    # for 2 epochs (24 samples, micro-batch 3, k = 4) and compares with al.run(Recipe(3, 4)).
    # Observed: how often the real optimizer's step() ran (once per window: 4 times).
    import torch.nn.functional as F

    if not callable(answer):
        return "answer with a class or function taking (optimizer, k) and returning a wrapper"
    data = regression_data(24, 2, seed=12)
    model = mlp(2, 3, 1, depth=1, seed=12)
    mine = copy.deepcopy(model)
    optimizer = torch.optim.SGD(mine.parameters(), lr=0.05)
    # spied before the wrapper is built, so a wrapper that keeps optimizer.step is counted too
    with Spy(optimizer, "step", "the optimizer's step()") as steps:
        wrapped = answer(optimizer, 4)
        if not (
            callable(getattr(wrapped, "step", None))
            and callable(getattr(wrapped, "zero_grad", None))
        ):
            return "the wrapper needs step() and zero_grad() methods"
        for _ in range(2):
            for mb in data.micro_batches(3):
                (F.mse_loss(mine(mb.x), mb.y) / 4).backward()
                wrapped.step()
                wrapped.zero_grad()
    got = params_of(mine)
    want = run(Recipe(3, 4), model, data, lr=0.05, epochs=2).params[-1]

    def same(a, b):
        return all(torch.allclose(a[n], b[n], rtol=1e-10, atol=1e-12) for n in b)

    if same(got, params_of(model)):
        return (
            "the parameters never changed: step() must reach the optimizer once per k micro-batches"
        )
    if steps.calls != 4:
        return (
            f"{steps.sentence(4)} over 16 micro-batches: step() and zero_grad() must act only "
            "when a window of k micro-batches is complete"
        )
    if not same(got, want):
        return (
            "the optimizer stepped once per window, but with the wrong gradient: zero_grad() must "
            "reach it only right after a real step, so each window starts from nothing"
        )
    return None
