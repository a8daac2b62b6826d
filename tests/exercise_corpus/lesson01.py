"""Lesson 01: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import math
import threading

import numpy as np
import torch
from torch.autograd import backward as _backward
from torch.utils.checkpoint import checkpoint

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


# 01.2: h = (w * x).exp() built once, backward on h.sum() and on (h ** 2).sum(), return w.grad
def _both_retained(w, x):
    h = (w * x).exp()
    first, second = h.sum(), (h**2).sum()
    torch.autograd.backward(first, retain_graph=True)
    torch.autograd.backward(second, retain_graph=True)
    return w.grad


def _second_first(w, x):  # the other order (the prompt leaves it open): the earlier call retains
    h = torch.exp(x * w)
    first, second = h.sum(), h.pow(2).sum()
    second.backward(retain_graph=True)
    first.backward(inputs=[w])
    return w.grad


def _trunk_twice(w, x):  # two trunks, one backward each: skips retain_graph
    (w * x).exp().sum().backward()
    ((w * x).exp() ** 2).sum().backward()
    return w.grad


def _retain_on_the_second(w, x):  # the first call frees the trunk: the second raises
    h = (w * x).exp()
    first, second = h.sum(), (h**2).sum()
    first.backward()
    second.backward(retain_graph=True)
    return w.grad


def _first_twice(w, x):  # one loss walked twice
    h = (w * x).exp()
    first = h.sum()
    first.backward(retain_graph=True)
    first.backward()
    return w.grad


def _fixed_inputs(w, x):  # the technique, but on the x of one example, not the one passed in
    h = (w * torch.tensor([1.0, 2.0])).exp()
    first, second = h.sum(), (h**2).sum()
    first.backward(retain_graph=True)
    second.backward()
    return w.grad


def _autograd_grad_summed(w, x):  # no backward at all
    h = (w * x).exp()
    (a,) = torch.autograd.grad(h.sum(), w, retain_graph=True)
    (b,) = torch.autograd.grad((h**2).sum(), w)
    return a + b


def _autograd_grad_into_grad(w, x):
    h = (w * x).exp()
    (a,) = torch.autograd.grad(h.sum(), w, retain_graph=True)
    (b,) = torch.autograd.grad((h**2).sum(), w)
    w.grad = a + b
    return w.grad


def _both_roots_at_once(w, x):  # one pass from both losses
    h = (w * x).exp()
    torch.autograd.backward([h.sum(), (h**2).sum()])
    return w.grad


def _saved_on_cpu(w, x):  # the trunk's saved tensors parked by save_on_cpu, hooks of its own
    with torch.autograd.graph.save_on_cpu():
        h = (w * x).exp()
        first, second = h.sum(), (h**2).sum()
    first.backward(retain_graph=True)
    second.backward()
    return w.grad


def _in_a_thread(w, x):  # both passes run by a thread of the answer's
    def both():
        h = (w * x).exp()
        first, second = h.sum(), (h**2).sum()
        first.backward(retain_graph=True)
        second.backward()

    worker = threading.Thread(target=both)
    worker.start()
    worker.join()
    return w.grad


def _checkpointed_trunk(w, x):  # the trunk recomputed in backward, the one graph kept
    h = checkpoint(lambda w, x: (w * x).exp(), w, x, use_reentrant=False)
    first, second = h.sum(), (h**2).sum()
    first.backward(retain_graph=True)
    second.backward()
    return w.grad


def _backward_imported_by_name(w, x):  # torch.autograd.backward bound before the check began
    h = (w * x).exp()
    _backward(h.sum(), retain_graph=True)
    _backward((h**2).sum())
    return w.grad


def _exp_as_a_power(w, x):  # the same trunk, its exp spelled as a power of e
    h = math.e ** (w * x)
    first, second = h.sum(), (h**2).sum()
    first.backward(retain_graph=True)
    second.backward()
    return w.grad


def _one_backward_doubled(w, x):  # one pass, its gradient doubled by hand
    h = (w * x).exp()
    (h.sum() + (h**2).sum()).backward()
    return 2 * w.grad


def _backward_of_the_sum(w, x):
    h = (w * x).exp()
    first, second = h.sum(), (h**2).sum()
    (first + second).backward()
    return w.grad


def _reentrant_checkpoint(w, x):  # rebuilds the trunk inside each backward pass
    h = checkpoint(lambda w, x: (w * x).exp(), w, x, use_reentrant=True)
    first, second = h.sum(), (h**2).sum()
    first.backward(retain_graph=True)
    second.backward()
    return w.grad


def _engine_called_directly(w, x):  # passes the checker cannot follow
    h = (w * x).exp()
    for loss, keep in ((h.sum(), True), ((h**2).sum(), False)):
        torch.autograd.Variable._execution_engine.run_backward(
            (loss,), (torch.ones_like(loss),), keep, False, (), True, True
        )
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
        ("torch.autograd.backward on each loss, both retaining", _both_retained),
        ("second first, then first with inputs=[w]", _second_first),
        ("the trunk under save_on_cpu()", _saved_on_cpu),
        ("both passes in a thread", _in_a_thread),
        ("the trunk under checkpoint(use_reentrant=False)", _checkpointed_trunk),
        ("torch.autograd.backward imported by name", _backward_imported_by_name),
        ("the exp spelled math.e ** (w * x)", _exp_as_a_power),
    ],
    "01.3": [
        ("a list in another order", ["d", "b", "a"]),
        ("a frozenset", frozenset("abd")),
        ("a tuple", ("a", "b", "d")),
        ("a dict's keys", dict.fromkeys("abd").keys()),
    ],
}

WRONG = {
    "01.1": [
        ("the detached leaf counted", 3),
        ("every node of the graph, counted by the package", al.count_nodes(_exercise_01_1_graph())),
        ("not a whole number", 2.5),
        ("a node per element of every leaf: 3 + 1 + 1", 5),
    ],
    "01.2": [
        ("the trunk built twice, one backward each: skips retain_graph", _trunk_twice),
        ("retain_graph on the second call only", _retain_on_the_second),
        ("the first loss walked twice", _first_twice),
        ("the x of one example instead of the x passed in", _fixed_inputs),
        ("torch.autograd.grad on each, summed: no backward", _autograd_grad_summed),
        ("torch.autograd.grad on each, written into w.grad", _autograd_grad_into_grad),
        ("one backward from both losses at once", _both_roots_at_once),
        ("one backward of the sum, w.grad doubled", _one_backward_doubled),
        ("one backward of first + second", _backward_of_the_sum),
        ("the trunk under checkpoint(use_reentrant=True)", _reentrant_checkpoint),
        ("autograd's engine called directly", _engine_called_directly),
    ],
    "01.3": [
        ("detach thought to cut d off for good", {"a", "b"}),
        ("the output too", {"a", "b", "c", "d"}),
        ("d thought to pass its gradient on to a", {"a", "d"}),
        ("none of them", set()),
    ],
}

STUBS = {
    "01.1": [("the cell's None", None)],
    "01.2": [("the cell's function", _stub)],
    "01.3": [("the cell's None", None)],
}


# answers that make a pass cosmetic: each pass must add its own loss's gradient
def _doubled_after_a_zero_pass(w, x):
    h = (w * x).exp()
    first, second = h.sum(), (h**2).sum()
    first.backward(retain_graph=True)
    second.backward(torch.tensor(0.0))  # walks the trunk, adds nothing
    w.grad.add_(torch.autograd.grad((((w * x).exp()) ** 2).sum(), w)[0])
    return w.grad


def _two_losses_sharing_only_the_product(w, x):
    p = w * x  # shared, but each loss builds its own exp
    first, second = p.exp().sum(), (p.exp() ** 2).sum()
    first.backward(retain_graph=True)
    second.backward()
    return w.grad


def _weighted_passes(w, x):  # the right total, from passes weighted 2 and 0
    h = (w * x).exp()
    first, second = h.sum(), (h**2).sum()
    (first + second).backward(torch.tensor(2.0), retain_graph=True)
    (first + second).backward(torch.tensor(0.0))
    w.grad.div_(2)
    return w.grad


# answers that run both passes right but do not let them accumulate into w.grad
def _grad_reset_between(w, x):
    h = (w * x).exp()
    first, second = h.sum(), (h**2).sum()
    first.backward(retain_graph=True)
    w.grad = None  # first's gradient dropped: w.grad ends as second's alone
    second.backward()
    return w.grad


def _grad_zeroed_between(w, x):
    h = (w * x).exp()
    first, second = h.sum(), (h**2).sum()
    first.backward(retain_graph=True)
    w.grad.zero_()
    second.backward()
    return w.grad


def _grad_halved_after(w, x):  # the mean of the two passes, not their sum
    h = (w * x).exp()
    first, second = h.sum(), (h**2).sum()
    first.backward(retain_graph=True)
    second.backward()
    w.grad.div_(2)
    return w.grad


def _accumulated_by_hand(w, x):  # first's gradient set aside, then added back by hand
    h = (w * x).exp()
    first, second = h.sum(), (h**2).sum()
    first.backward(retain_graph=True)
    g = w.grad.clone()
    w.grad = None
    second.backward()
    w.grad += g
    return w.grad


WRONG["01.2"] += [
    ("w.grad set to None between the passes", _grad_reset_between),
    ("w.grad zeroed between the passes", _grad_zeroed_between),
    ("w.grad halved after both passes", _grad_halved_after),
    ("a zero second pass, second's gradient added by hand", _doubled_after_a_zero_pass),
    ("the product shared, each loss with its own exp", _two_losses_sharing_only_the_product),
    ("passes weighted 2 and 0, halved by hand", _weighted_passes),
    ("first's gradient set aside and added back by hand", _accumulated_by_hand),
]

# words the hint of a wrong answer must contain (tests/test_exercises.py)
HINTS = {
    "the trunk built twice, one backward each: skips retain_graph": "walked nothing in common",
    "torch.autograd.grad on each, summed: no backward": "called torch.autograd.grad 2 times",
    "one backward of the sum, w.grad doubled": "1 backward pass wrote",
    "one backward of first + second": "1 backward pass wrote",
    "the trunk under checkpoint(use_reentrant=True)": "use_reentrant=False",
    "autograd's engine called directly": "engine called directly",
    "retain_graph on the second call only": "second time",
    "the first loss walked twice": "first's gradient is",
    "the x of one example instead of the x passed in": "x = [0.5, -1.0, 2.0]",
    "one backward from both losses at once": "1 backward pass wrote",
    "the product shared, each loss with its own exp": "shared only part of the trunk",
    "w.grad set to None between the passes": "only second's gradient",
    "w.grad zeroed between the passes": "AccumulateGrad adds",
    "w.grad halved after both passes": "AccumulateGrad adds",
    "none of them": "an empty set says no tensor has a .grad",
    "detach thought to cut d off for good": "a tensor with a .grad after c.backward() is missing",
    "the output too": "c is where backward starts",
    "d thought to pass its gradient on to a": "a tensor with a .grad after c.backward() is missing",
    "the detached leaf counted": "s.detach() is a new tensor cut out of the graph",
    "a node per element of every leaf: 3 + 1 + 1": "reaches through recorded operations",
    "first's gradient set aside and added back by hand": "before the second backward pass",
}
