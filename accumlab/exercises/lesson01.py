"""Lesson 01 exercises: the autograd graph."""

from __future__ import annotations

import torch

from . import exercise


@exercise("01.1", 1, "Count the leaves that receive .grad")
def _count_leaves(answer):
    # loss = ((y - w*x)**2).mean() with w and b requiring grad, x and y plain data
    if not isinstance(answer, int) or isinstance(answer, bool):
        return "answer with an integer: how many AccumulateGrad nodes does the graph have?"
    if answer != 2:
        return "only tensors created with requires_grad=True get an AccumulateGrad node; data tensors do not"
    return None


@exercise("01.2", 2, "Call backward twice on one graph")
def _backward_twice(answer):
    # answer(w, x) must build loss = (w * x).pow(2).sum(), call backward twice and return w.grad
    w = torch.tensor(3.0, requires_grad=True)
    x = torch.tensor([1.0, 2.0])
    grad = answer(w, x)
    if not isinstance(grad, torch.Tensor):
        return "return w.grad (a tensor) after the second backward"
    once = 2 * w.detach() * (x**2).sum()
    if torch.allclose(grad, once):
        return "w.grad after two backward calls should hold the sum of both: what does .grad do across calls?"
    if not torch.allclose(grad, 2 * once):
        return "the first backward frees the graph unless you ask it not to: see retain_graph"
    return None


@exercise("01.3", 2, "Which tensors have .grad after backward?")
def _which_grads(answer):
    # a = leaf (requires_grad), b = a * 2, c = b.sum(); c.backward()
    if not isinstance(answer, (set, list, tuple)):
        return "answer with a set of names, e.g. {'a', 'b'}"
    answer = set(answer)
    if answer == {"a"}:
        return None
    if "b" in answer:
        return "non-leaf tensors do not keep .grad unless you call .retain_grad() on them"
    if "c" in answer:
        return "c is the output; backward starts there but .grad is only stored on leaves"
    return "the leaf created with requires_grad=True is where .grad lands"
