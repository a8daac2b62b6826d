"""Lesson 02 exercises: .grad accumulation and zeroing."""

from __future__ import annotations

import copy

import torch

from ..data import classic_data, regression_data
from ..engine import Recipe, plain_copy, run
from ..models import ScalarModel, mlp
from ..reference import full_batch_grads
from . import exercise
from ._answers import Hint, compare
from ._calls import audit_loops
from ._draws import fresh_rng
from ._every_kth import window_run
from ._graph_watch import OutputGradients
from ._observe import Added, Observe, Refuse, forwards_phrase, multiple_of


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
REFUSED = (
    "al.full_batch_grads",
    "al.accumulated_grads",
    "al.accumulation_progress",
    "al.run",
    "al.memory.train_step",  # lesson 05's step accumulates in place, on the model it is given
)


def _stale(model) -> dict:
    """What `.grad` holds as the answer is called: another batch's gradient, as a loop that zeroes
    at the top of its next iteration leaves it (an answer must zero it first)."""
    return full_batch_grads(model, regression_data(12, 3, seed=13))


@exercise("02.2", 2, "Accumulate a summed loss: the full batch's gradient of the sum in .grad")
def _accumulate(answer):
    # answer(model, data, micro_batch_size) → model's .grad = the gradient of
    # F.mse_loss(model(data.x), data.y, reduction="sum"); data splits evenly; .grad arrives
    # holding another batch's gradient. Observed: the forwards and the rows each received, the
    # backward passes and what each added, the graphs alive at once.
    if not callable(answer):
        return (
            "answer with a function accumulate(model, data, micro_batch_size), got "
            f"{type(answer).__name__}"
        )
    # then 16 samples in micro-batches of 2: a scale or a size typed in for the first fails
    first = _accumulate_on(
        answer, regression_data(12, 3, seed=11), mlp(3, 4, 1, depth=1, seed=11), 4
    )
    if first is not None:
        return first
    return _accumulate_on(
        answer, regression_data(16, 3, seed=12), mlp(3, 4, 1, depth=1, seed=12), 2
    )


def _accumulate_on(answer, data, model, size: int) -> str | None:
    from ..compare import flatten

    mine = copy.deepcopy(model)
    stale = _stale(model)
    for name, p in mine.named_parameters():
        p.grad = stale[name].clone()
    k = len(data) // size
    micro = data.micro_batches(size)
    with (
        Refuse(*REFUSED, *audit_loops()),  # lesson 08's loops, as 05.3 refuses them too
        Observe(mine, inputs=True) as seen,
        Added(mine) as added,
        OutputGradients(mine) as arrived,
    ):
        answer(mine, data, size)
    want = forwards_phrase([size] * k)
    rows = [c.rows for c in seen.forwards if c.graph]  # a forward under no_grad (a log) is free
    if rows != [size] * k:
        raise Hint(
            f"your answer ran {forwards_phrase(rows)} with a graph{seen.no_graph_note()}; "
            f"accumulation runs {want}, one per micro-batch, each recording its graph"
        )
    fed = seen.fed(micro)  # the rows: a reshaped batch has the right count
    if fed:
        raise Hint(f"{fed}: accumulation feeds each micro-batch's own x to the model, once")
    if seen.backwards == 0 and seen.grad_only == k:
        raise Hint(
            f"your answer took each micro-batch's gradient with torch.autograd.grad ({k} calls) "
            "and added them by hand: this exercise asks backward() to do the adding into .grad, "
            "once per micro-batch"
        )
    if seen.backwards != k:
        raise Hint(
            f"your answer ran {seen.backwards_phrase()}; accumulation calls backward once per "
            f"micro-batch ({k}), each adding into .grad"
        )
    if seen.grad_only:
        raise Hint(
            f"your answer ran {seen.backwards_phrase()}: accumulation needs no "
            "torch.autograd.grad — each micro-batch's backward adds its own gradient into .grad"
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
    vectors = added.vectors()
    if any(not bool(v.any()) for v in vectors):
        raise Hint(
            "a backward pass added nothing to .grad: each micro-batch's backward must carry its "
            "own share of the full-batch gradient"
        )
    # each backward must add one micro-batch's own gradient (any positive scale), each once
    own = [flatten(full_batch_grads(model, mb)) for mb in micro]
    unmatched = list(range(k))
    for v in vectors:
        j = next((j for j in unmatched if multiple_of(v, own[j], rel=1e-8)), None)
        if j is None and any(multiple_of(v, own[i], rel=1e-5) for i in unmatched):
            raise Hint(
                "each backward pass added nearly its micro-batch's own gradient, off by about 1e-7 "
                "relative, as if rounded like float32: keep the loss in the model's float64, no "
                ".float() on the way"
            )
        if j is None:
            raise Hint(
                "a backward pass added something other than one micro-batch's own gradient: "
                "each micro-batch's backward carries the loss of that micro-batch's rows"
            )
        unmatched.remove(j)
    if arrived.not_own(micro, lambda out, mb: out - mb.y) or not _all_through(
        sum(vectors), arrived.through_outputs(model)
    ):  # each output got its own loss's gradient, and .grad got nothing else
        raise Hint(
            "your backward passes added to .grad more than the gradient that reached the model's "
            "outputs through the forwards it watched (or a forward did not receive its own loss's "
            "gradient): each micro-batch's backward starts from that micro-batch's loss, through "
            "the forward it just ran, and carries nothing computed elsewhere"
        )
    got = {n: p.grad for n, p in mine.named_parameters()}
    if any(g is None for g in got.values()):
        missing = next(n for n, g in got.items() if g is None)
        raise Hint(
            f"your {k} backward passes wrote .grad, but {missing}.grad is None after your answer: "
            "something reset it after the last one (a zero_grad() after the loop?)"
        )
    flat = plain_copy(flatten(got))  # a subclass of the answer's would answer the comparisons
    if not bool(flat.any()):
        raise Hint(
            f"your {k} backward passes wrote .grad, but it is all zeros after your answer: "
            "something reset it after the last one (a zero_grad() after the loop?)"
        )
    if not multiple_of(flat, sum(vectors)):
        if multiple_of(flat, vectors[-1]):
            raise Hint(
                ".grad holds only the last micro-batch's backward: a zero_grad() inside the loop "
                "erased the micro-batches before it — zero once, before the first backward"
            )
        arrived = flatten(stale)  # kept, then maybe scaled with the rest
        if multiple_of(flat - arrived, sum(vectors)) or multiple_of(flat, arrived + sum(vectors)):
            raise Hint(
                ".grad still holds the gradient the model arrived with, plus your micro-batches: "
                "zero it once, before the first backward"
            )
        raise Hint(
            ".grad ended as something other than what your backward passes added (or a multiple "
            "of it): let backward alone write the gradient — no rescaling or overwriting .grad "
            "between passes"
        )
    if added.restarted():  # the sum is right, but it was added up outside .grad
        raise Hint(added.restart_hint(k))
    full = flatten(full_batch_grads(model, data)) * len(data)  # the summed loss's gradient
    if torch.allclose(flat, full, rtol=1e-10, atol=1e-12):
        return None
    ratio = float(flat @ full / (full @ full))
    named = {
        1 / len(data): "that is the gradient of the mean loss (the lesson's loop): the summed loss "
        f"is {len(data)} times larger. What do the micro-batches' sums add up to?",
        1
        / k: f"the gradient is {k}× too small: the micro-batches' sums already add up to the full "
        "batch's sum",
        1 / size: f"the gradient is {size}× too small: each micro-batch's mean loss is its sum ÷ "
        f"{size}",
    }
    for factor, says in named.items():
        if abs(ratio - factor) <= 1e-9 * factor:
            raise Hint(says)
    if abs(ratio - 1) < 1e-3:  # "1 × the gradient" would read as right
        raise Hint(
            f"your .grad is {abs(ratio - 1):.1g} off the summed loss's gradient, relatively (checked "
            "to 1e-10): a scale slightly off — each micro-batch's summed loss needs no divisor"
        )
    raise Hint(
        f"your .grad is {ratio:.4g} × the summed loss's gradient: each micro-batch's loss needs "
        "another scale"
    )


@exercise("02.3", 2, "Make zero_grad() and step() on every iteration correct, as Accelerate does")
def _window_optimizer(answer):
    # answer(optimizer, k) -> an object with step() and zero_grad(); the checker runs the loop
    #     for mb in micro_batches: (loss(mb) / k).backward(); opt.step(); opt.zero_grad()
    # with k = 4 (micro-batches of 3) and k = 3 (micro-batches of 2), each over whole windows of a
    # sample count and a number of epochs (2-4) drawn afresh, so no table of step positions fits,
    # and compares with al.run(Recipe(size, k)). Observed: how often the real optimizer's step()
    # ran (once per window).
    if not callable(answer):
        return "answer with a class or function taking (optimizer, k) and returning a wrapper"
    rng = fresh_rng()
    for k, size in ((4, 3), (3, 2)):
        samples = k * size * rng.choice((2, 3, 4, 5))
        hint = window_run(answer, k, size, REFUSED, samples=samples, epochs=rng.choice((2, 3, 4)))
        if hint:
            return hint
    return None


def _all_through(added: torch.Tensor, through: torch.Tensor) -> bool:
    """What the passes added equals what flowed through the watched outputs, to float64 rounding."""
    return bool((added - through).abs().max() <= 1e-8 * through.abs().max())
