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
    wrong = {  # 3 comes from counting s, or from counting w twice and forgetting b
        3: "s.detach() is a new tensor cut out of the graph, so no gradient reaches s; and a leaf "
        "used twice (w) still has one node",
        4: "w is used twice, but a leaf has one AccumulateGrad node, reached along both paths",
        1: "b requires grad too: every leaf that reaches the loss gets its own node",
    }
    n = integer(answer)  # 2, 2.0, np.int64(2), torch.tensor(2) alike
    return (
        None
        if n == 2
        else wrong.get(
            n,
            "one AccumulateGrad node per leaf that requires grad and that the loss reaches "
            "through recorded operations (a tensor, not its elements)",
        )
    )


# (w, x) the answer is run on: two, so that an answer ignoring its inputs is not graded right
CASES_01_2 = ((0.5, (1.0, 2.0)), (-0.3, (0.5, -1.0, 2.0)))
TOLERANCE_01_2 = 1e-5  # relative, float32: each pass's gradient against torch's own


def _observe_passes(answer, w0: float, xs: tuple):
    """Run answer(w, x) with its backward calls followed (`BackwardWalks`, from any thread);
    return (returned, w, the nodes each backward call walked, for each pass that wrote w.grad in
    order the index of the call that ran it — None for a pass no followed call started —, passes
    that reached w without writing .grad, what each writing pass added to w.grad, and what w.grad
    held as each writing pass reached w)."""
    from ._backward_nodes import BackwardWalks

    w = torch.tensor(w0, requires_grad=True)
    x = torch.tensor(xs)

    def task() -> int:
        return torch._C._current_graph_task_id()  # the backward pass running now

    wrote: list[tuple[int, int | None]] = []  # (backward pass, the call that started it)
    reached: set[int] = set()
    added: dict[int, torch.Tensor] = {}  # backward pass → what it added to w.grad
    held: dict[int, float | None] = {}  # backward pass → w.grad as it reached w, before adding

    def seen(g):
        reached.add(task())
        if task() not in held:
            held[task()] = None if w.grad is None else float(w.grad)
        added[task()] = added.get(task(), 0) + g.detach().clone()

    with BackwardWalks() as walks:
        w.register_hook(seen)
        w.register_post_accumulate_grad_hook(lambda p: wrote.append((task(), walks.running())))
        returned = answer(w, x)
    passes = [t for t, _ in wrote]
    sums = [added[t] for t in passes if t in added]
    starts = [held.get(t) for t in passes]
    return returned, w, walks.walks, [c for _, c in wrote], reached - set(passes), sums, starts


def _shared_trunk(first: list, second: list, w: torch.Tensor) -> None:
    """Raise the hint unless the two writing passes' walks share more of the trunk than the
    operation that takes w itself (w * x): a shared node above it — the exp, however it is
    spelled — means both losses came from one h (their gradients are checked apart)."""
    from ._backward_nodes import shared_toward

    shared = shared_toward(first, second, w)

    def on_w(node) -> bool:
        return any(getattr(child, "variable", None) is w for child, _ in node.next_functions)

    if any(not on_w(node) for node in shared):
        return
    if not shared:
        raise Hint(
            "your two backward passes walked nothing in common on their way to w: each walked "
            "its own copy of the trunk. Build h once and let both losses' backward passes walk it"
        )
    if any(type(node).__name__ == "CheckpointFunctionBackward" for node in shared):
        raise Hint(
            "torch.utils.checkpoint with use_reentrant=True rebuilds the trunk inside each "
            "backward pass, a new graph each time, so the two passes share no exp: with "
            "use_reentrant=False both walk the one trunk"
        )
    raise Hint(
        "your two backward passes shared only part of the trunk, the operation on w itself: "
        "each loss built the rest (its own exp). Build h = (w * x).exp() once and both losses "
        "from that h"
    )


def _head_grads(w0: float, xs: tuple) -> tuple[float, float]:
    """d first / dw and d second / dw for h = exp(w·x), first = Σh, second = Σh²."""
    w = torch.tensor(w0, requires_grad=True)
    h = (w * torch.tensor(xs)).exp()
    losses = (h.sum(), (h**2).sum())  # one trunk: the first grad must keep it for the second
    return tuple(float(torch.autograd.grad(loss, w, retain_graph=True)[0]) for loss in losses)


def _accumulated(w: torch.Tensor, w0: float, xs: tuple, first: float, second: float) -> None:
    """Raise the hint unless w.grad ends as first's gradient plus second's: each pass added its
    own (checked before), so a w.grad holding less was reset, zeroed or rewritten in between."""
    if w.grad is None:
        return  # "return w.grad itself" says it
    total, got = first + second, float(w.grad)
    if abs(got - total) <= TOLERANCE_01_2 * abs(total):
        return
    alone = [
        n
        for n, g in (("second", second), ("first", first))
        if abs(got - g) <= TOLERANCE_01_2 * abs(g)
    ]
    held = f"only {alone[0]}'s gradient" if alone else f"{got:.6g}"
    raise Hint(
        f"at w = {w0}, x = {list(xs)} w.grad holds {held} after both passes, not first's plus "
        f"second's ({total:.6g}): AccumulateGrad adds each pass into w.grad, and that sum is "
        "what the exercise returns, so leave w.grad alone between and after the passes"
    )


def _added_onto_the_first(starts: list, added: list, w0: float, xs: tuple) -> None:
    """Raise the hint unless the second pass began from what the first left in w.grad: a w.grad
    ending right because the first gradient was set aside and added back by hand did the
    accumulation instead of AccumulateGrad."""
    left, began = float(added[0]), starts[1]
    if began is not None and abs(began - left) <= TOLERANCE_01_2 * abs(left):
        return
    state = "was None" if began is None else f"held {began:.6g}"
    raise Hint(
        f"at w = {w0}, x = {list(xs)} w.grad {state} before the second backward pass, not "
        f"the {left:.6g} the first pass left there: let the second pass add into the first's "
        "gradient (AccumulateGrad does the adding), not an add of your own afterwards"
    )


@exercise("01.2", 2, "Two losses that share a trunk")
def _two_losses(answer):
    # answer(w, x) must build h = (w * x).exp() ONCE, call backward on first = h.sum() and on
    # second = (h ** 2).sum() (two passes, one per loss, in either order) and return w.grad.
    # Observed on each case: the passes that wrote w.grad, what each added, whether both walked
    # the trunk's own nodes (one trunk walked twice, which needs retain_graph on the earlier
    # call; on both is allowed), and that w.grad ends as the sum of the two gradients.
    if not callable(answer):
        return f"answer with a function two_losses(w, x) that returns w.grad, got {type(answer).__name__}"
    for w0, xs in CASES_01_2:
        returned, w, walks, calls, grad_only, added, starts = _observe_passes(answer, w0, xs)
        if grad_only and not calls:
            raise Hint(
                f"your answer called torch.autograd.grad {plural(len(grad_only), 'time')}, "
                "which returns the gradient without writing w.grad: the exercise asks for backward()"
            )
        if len(calls) != 2:
            raise Hint(
                f"{plural(len(calls), 'backward pass', 'backward passes')} wrote w.grad; the "
                "exercise calls backward once on each of the two losses (a backward of their sum "
                "is one pass)"
            )
        if None in calls:
            raise Hint(
                "w.grad was written by a backward pass that neither backward() nor "
                "torch.autograd.backward started (autograd's engine called directly?), so the "
                "checker cannot see which nodes it walked: call backward() on each loss"
            )
        _shared_trunk(walks[calls[0]], walks[calls[1]], w)
        first, second = _head_grads(w0, xs)
        got = sorted(float(a) for a in added)
        if len(got) != 2 or not all(
            abs(g - e) <= TOLERANCE_01_2 * abs(e) for g, e in zip(got, sorted((first, second)))
        ):
            shown = ", ".join(f"{g:.6g}" for g in got)
            raise Hint(
                f"at w = {w0}, x = {list(xs)} your two backward passes added {shown} to w.grad; "
                f"first's gradient is {first:.6g} and second's {second:.6g}: each pass should walk "
                "one of the two losses, as built from this call's w and x"
            )
        _accumulated(w, w0, xs, first, second)
        _added_onto_the_first(starts, added, w0, xs)
        if not isinstance(returned, torch.Tensor):
            raise Hint("return w.grad (a tensor) after both backward calls")
        if w.grad is None or not torch.equal(returned.detach(), w.grad):
            raise Hint("return w.grad itself, not another tensor")
    return None


NAMES = {"a", "b", "c", "d"}


@exercise("01.3", 2, "Which tensors have .grad after backward?")
def _which_grads(answer):
    # a leaf requiring grad; b = a * 2 with b.retain_grad(); d = a.detach().requires_grad_(), a
    # new leaf; c = (b * d).sum(); c.backward(): a, b and d get a .grad, c (no retain_grad) none
    if isinstance(answer, str) and answer in NAMES:
        answer = {answer}
    from collections.abc import Set

    # any set-like collection (a set, dict.keys()) or a sequence of names; not a dict or a string
    if isinstance(answer, (str, bytes, dict)) or not isinstance(answer, (Set, list, tuple)):
        return "answer with a set of names, e.g. {'a', 'b'}"
    if not all(isinstance(n, str) for n in answer):
        return "answer with the names as strings, e.g. {'a', 'b'}"
    names = {n.strip().lower() for n in answer}
    if not names <= NAMES:
        return f"the tensors are named a, b, c and d; got {sorted(names - NAMES)}"
    if "c" in names:
        return "c is where backward starts, but it is a non-leaf that did not call retain_grad()"
    if not names:  # the count below would be the answer's size
        return "an empty set says no tensor has a .grad after c.backward(): which ones do?"
    missing = {"a", "b", "d"} - names
    if missing:  # say that one is missing, not which: the learner decides
        return "a tensor with a .grad after c.backward() is missing from your set (or more)"
    return None
