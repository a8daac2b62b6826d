"""Lesson 01 exercises: the autograd graph."""

from __future__ import annotations

import torch

from . import exercise
from ._answers import Hint, integer
from ._calls import plural


@exercise("01.1", 1, "Count the AccumulateGrad nodes")
def _count_leaves(answer):
    # loss = ((y - (w*x + b))**2).mean() + 0.01*(w**2).sum() + s.detach()*h.mean(): w and b
    # reach the loss (w along two paths, one node), s only through detach()
    wrong = {
        3: "s.detach() is a new tensor cut out of the graph: no gradient reaches s",
        4: "w is used twice, but a leaf has one AccumulateGrad node, reached along both paths",
        1: "b requires grad too: every leaf that reaches the loss gets its own node",
    }
    n = integer(answer)  # 2, 2.0, np.int64(2), torch.tensor(2) alike
    return None if n == 2 else wrong.get(n, "one AccumulateGrad node per leaf that requires grad")


def _observe_twice(answer):
    """Run answer(w, x) with every saved tensor of the graphs it builds tagged; return (returned,
    w, reads of each saved tensor by backward, backward passes that wrote w.grad, passes that
    reached w without writing .grad, what each pass added to w.grad)."""
    w = torch.tensor(3.0, requires_grad=True)
    x = torch.tensor([1.0, 2.0])
    saved: list[torch.Tensor] = []
    reads: dict[int, int] = {}
    wrote: set[int] = set()
    reached: set[int] = set()

    def pack(t):
        saved.append(t.detach())
        return len(saved) - 1  # autograd stores the tag; backward hands it to unpack

    def unpack(tag):
        reads[tag] = reads.get(tag, 0) + 1
        return saved[tag]

    def task() -> int:
        return torch._C._current_graph_task_id()  # the backward pass running now

    added: dict[int, torch.Tensor] = {}  # backward pass → what it added to w.grad

    def seen(g):
        reached.add(task())
        added[task()] = added.get(task(), 0) + g.detach().clone()

    w.register_hook(seen)
    w.register_post_accumulate_grad_hook(lambda p: wrote.add(task()))
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        returned = answer(w, x)
    counts = [reads.get(tag, 0) for tag in range(len(saved))]
    return returned, w, counts, len(wrote), len(reached - wrote), list(added.values())


@exercise("01.2", 2, "Call backward twice on one graph")
def _backward_twice(answer):
    # answer(w, x) must build loss = (w * x).pow(2).sum() ONCE, call backward on it twice and
    # return w.grad. Observed: how often backward read each tensor the graph saved (twice each:
    # one graph, two passes), and how many backward passes wrote w.grad.
    returned, w, reads, writes, grad_only, passes = _observe_twice(answer)
    if not reads:
        raise Hint(
            "the checker saw no graph being built: build the loss from w and x with plain "
            "operations inside the function"
        )
    if grad_only and not writes:
        raise Hint(
            f"your answer called torch.autograd.grad {plural(grad_only, 'time')}, "
            "which returns the gradient without writing w.grad: the exercise asks for backward()"
        )
    if writes != 2:
        raise Hint(
            f"{plural(writes, 'backward pass', 'backward passes')} wrote w.grad; the exercise "
            "calls backward twice on one graph (what does .grad do across calls?)"
        )
    if max(reads) < 2:
        raise Hint(
            "each tensor the graph saved was read by backward once: your two backward passes "
            "walked two different graphs. Build the loss once and walk that one graph twice — "
            "the first backward frees what it saved unless you ask it not to (retain_graph)"
        )
    walked_once = sum(r == 1 for r in reads)
    if walked_once:
        raise Hint(
            f"{plural(walked_once, 'tensor')} the graph saved {'was' if walked_once == 1 else 'were'} "
            "read by only one of your backward passes: part of each loss was built twice. Build "
            "the loss once and call backward on that same loss twice"
        )
    once = 2 * w.detach() * (torch.tensor([1.0, 2.0]) ** 2).sum()
    if len(passes) == 2 and not all(torch.allclose(p, once, rtol=1e-6, atol=0) for p in passes):
        added = ", ".join(f"{float(p):g}" for p in passes)
        raise Hint(
            f"your two backward passes added {added} to w.grad: each backward of the loss should "
            "add the same, non-zero gradient (call backward() plainly, and let .grad add them up)"
        )
    if not isinstance(returned, torch.Tensor):
        raise Hint("return w.grad (a tensor) after the second backward")
    if w.grad is None or not torch.allclose(w.grad, 2 * once, rtol=1e-6, atol=0):
        raise Hint("after two backward passes w.grad should hold the sum of both")
    if not torch.equal(returned.detach(), w.grad):
        raise Hint("return w.grad itself, not another tensor")
    return None


NAMES = {"a", "b", "c", "d"}


@exercise("01.3", 2, "Which tensors have .grad after backward?")
def _which_grads(answer):
    # a leaf requiring grad; b = a * 2 with b.retain_grad(); c = b.sum(); d = a.detach(); c.backward()
    if isinstance(answer, str) and answer in NAMES:
        answer = {answer}
    if isinstance(answer, (str, bytes, dict)) or not isinstance(
        answer, (set, frozenset, list, tuple)
    ):
        return "answer with a set of names, e.g. {'a', 'b'}"
    if not all(isinstance(n, str) for n in answer):
        return "answer with the names as strings, e.g. {'a', 'b'}"
    names = {n.strip().lower() for n in answer}
    if not names <= NAMES:
        return f"the tensors are named a, b, c and d; got {sorted(names - NAMES)}"
    if "d" in names:
        return "d = a.detach() shares a's memory but is a new leaf that does not require grad"
    if "c" in names:
        return "c is where backward starts, but it is a non-leaf that did not call retain_grad()"
    if "b" not in names:
        return "b is a non-leaf, but it asked to keep its gradient"
    if "a" not in names:
        return "a is the leaf created with requires_grad=True"
    return None
