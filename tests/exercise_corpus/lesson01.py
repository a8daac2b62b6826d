"""Lesson 01: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import numpy as np
import torch

import accumlab as al


def _exercise_01_1_graph():
    """The graph of exercise 01.1, as the lesson writes it."""
    x, y = torch.randn(3), torch.randn(3)
    w = torch.randn(3, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    s = torch.tensor(2.0, requires_grad=True)
    h = w * x + b
    return ((y - h) ** 2).mean() + 0.01 * (w**2).sum() + s.detach() * h.mean()


_GRAPH = al.draw_graph(_exercise_01_1_graph())


# 01.2: build (w * x).pow(2).sum() once, backward twice, return w.grad
def _both_retained(w, x):
    loss = ((w * x) ** 2).sum()
    torch.autograd.backward(loss, retain_graph=True)
    torch.autograd.backward(loss, retain_graph=True)
    return w.grad


def _inputs_named(w, x):
    loss = (w * x).pow(2).sum()
    loss.backward(retain_graph=True)
    loss.backward(inputs=[w])
    return w.grad


def _built_twice(w, x):  # two graphs, one backward each: skips retain_graph
    (w * x).pow(2).sum().backward()
    (w * x).pow(2).sum().backward()
    return w.grad


def _doubled(w, x):  # one backward, the second faked
    (w * x).pow(2).sum().backward()
    return 2 * w.grad


def _autograd_grad_twice(w, x):  # no backward at all
    loss = (w * x).pow(2).sum()
    (first,) = torch.autograd.grad(loss, w, retain_graph=True)
    (second,) = torch.autograd.grad(loss, w)
    return first + second


def _autograd_grad_into_grad(w, x):
    loss = (w * x).pow(2).sum()
    (first,) = torch.autograd.grad(loss, w, retain_graph=True)
    (second,) = torch.autograd.grad(loss, w)
    w.grad = first + second
    return w.grad


def _three_times(w, x):
    loss = (w * x).pow(2).sum()
    for _ in range(3):
        loss.backward(retain_graph=True)
    return w.grad


def _stub(w, x): ...  # the lesson's cell


RIGHT = {
    "01.1": [
        ("a float", 2.0),
        ("a numpy integer", np.int64(2)),
        ("a 0-d tensor", torch.tensor(2)),
        (
            "counted from al.draw_graph",
            sum(n.startswith("AccumulateGrad") for n in _GRAPH.nodes),
        ),
    ],
    "01.2": [
        ("torch.autograd.backward twice, both retaining", _both_retained),
        ("the second backward restricted to inputs=[w]", _inputs_named),
    ],
    "01.3": [
        ("a list in another order", ["b", "a"]),
        ("a frozenset", frozenset("ab")),
        ("a tuple", ("a", "b")),
    ],
}

WRONG = {
    "01.1": [
        ("the detached leaf counted", 3),
        ("every node of the graph, counted by the package", al.count_nodes(_exercise_01_1_graph())),
        ("not a whole number", 2.5),
    ],
    "01.2": [
        ("the loss built twice, one backward each: skips retain_graph", _built_twice),
        ("one backward, then 2 * w.grad", _doubled),
        ("torch.autograd.grad twice, summed: no backward", _autograd_grad_twice),
        ("torch.autograd.grad twice, written into w.grad", _autograd_grad_into_grad),
        ("three backward passes", _three_times),
    ],
    "01.3": [
        ("detach thought to share the gradient", {"a", "b", "d"}),
        ("the output too", {"a", "b", "c"}),
        ("none of them", set()),
    ],
}

STUBS = {
    "01.1": [("the cell's None", None)],
    "01.2": [("the cell's function", _stub)],
    "01.3": [("the cell's None", None)],
}


# answers that make the second pass cosmetic: each must add the same, non-zero gradient
def _doubled_after_a_zero_pass(w, x):
    loss = (w * x).pow(2).sum()
    loss.backward(retain_graph=True)
    loss.backward(torch.tensor(0.0))  # walks the graph, adds nothing
    w.grad.mul_(2)
    return w.grad


def _two_then_zero(w, x):
    loss = (w * x).pow(2).sum()
    loss.backward(torch.tensor(2.0), retain_graph=True)
    loss.backward(torch.tensor(0.0))
    return w.grad


def _two_losses_sharing_a_product(w, x):
    h = w * x  # shared, but each loss builds its own pow and sum
    first, second = h.pow(2).sum(), h.pow(2).sum()
    first.backward(retain_graph=True)
    second.backward()
    return w.grad


def _retain_both_times(w, x):
    """Right: retain_graph on both passes (the second need not free it)."""
    loss = (w * x).pow(2).sum()
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    return w.grad


RIGHT["01.2"].append(("retain_graph on both passes", _retain_both_times))
WRONG["01.2"] += [
    ("doubled by hand after a zero second pass", _doubled_after_a_zero_pass),
    ("gradient 2 then gradient 0", _two_then_zero),
    ("two losses sharing w * x", _two_losses_sharing_a_product),
]
