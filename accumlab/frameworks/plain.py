"""Two hand-written PyTorch loops for lesson 11: the reference every framework is compared with,
and the textbook `loss / k` loop most tutorials show.

A runner takes (problem, model, optimizer, scheduler, folder) and trains one epoch; it returns what
the loop logged by itself ({} when nothing).
"""

from __future__ import annotations

from .problem import Problem


def reference_loop(problem: Problem, model, optimizer, scheduler, folder: str) -> dict:
    """Exact: every item of a window weighs 1 / (items in the window), short last window included —
    the gradient one big batch per window gives (lessons 02–03, normalization="global")."""
    batches = problem.micro_batches()
    for window in problem.windows():
        items = sum(problem.items(batches[i].y) for i in window)  # counted BEFORE any backward
        for i in window:
            mb = batches[i]
            (problem.sum_loss(model(mb.x), mb.y) / items).backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    return {}


def textbook_loop(problem: Problem, model, optimizer, scheduler, folder: str) -> dict:
    """`loss = loss / k` and a step every k micro-batches and after the last one (the nanoGPT-style
    loop): the mean of micro-batch means, and a short last window still divided by k."""
    batches = problem.micro_batches()
    k = problem.k
    for i, mb in enumerate(batches):
        loss = problem.mean_loss(model(mb.x), mb.y)
        (loss / k).backward()  # ÷ k: the CONFIGURED window, whatever this window holds
        if (i + 1) % k == 0 or i == len(batches) - 1:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
    return {}
