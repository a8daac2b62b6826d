"""Exercise 02.3's run: a learner's wrapper around the optimizer driven through whole windows, its
real steps counted by a step post-hook and `.grad` watched between the calls."""

from __future__ import annotations

import copy

import torch

from ..data import regression_data
from ..engine import Recipe, params_of, run
from ..models import mlp
from ._accelerate_count import AccelerateCounter
from ._ema_judge import flat_grads
from ._observe import Refuse, plural


def window_run(
    answer, k: int, size: int, refused: tuple, *, samples: int, epochs: int
) -> str | None:
    """Drive `answer(optimizer, k)`'s wrapper through `epochs` epochs of micro-batches of `size`
    (a backward, then `step()` and `zero_grad()`, each micro-batch) and judge it against
    `al.run`; `refused` names the calls the answer may not make. A hint, or None."""
    import torch.nn.functional as F

    data = regression_data(samples, 2, seed=12)
    model = mlp(2, 3, 1, depth=1, seed=12)
    mine = copy.deepcopy(model)
    optimizer = torch.optim.SGD(mine.parameters(), lr=0.05)
    micro, windows = epochs * len(data) // size, epochs * len(data) // (size * k)
    # a step hook runs on every route to the optimizer's step (a bound method kept before the
    # wrapper was built, `type(opt).step(opt)`), where a patched attribute sees only one
    steps, seen = [], [0]  # the micro-batch (counted from 1) each real step came after
    # inside a window the calls must leave .grad as the backward left it: the window is summed
    # in .grad itself (zeroing on every call and summing in a buffer of one's own is refused)
    touched: list[int] = []
    hook = optimizer.register_step_post_hook(lambda opt, args, kwargs: steps.append(seen[0]))
    try:
        # lesson 11's stand-in engine counts micro-steps just as the exercise asks
        with (
            AccelerateCounter() as library,
            Refuse("al.frameworks.StandInEngine", "al.bookkeeping.step_schedule", *refused),
        ):
            wrapped = answer(optimizer, k)
            if not (
                callable(getattr(wrapped, "step", None))
                and callable(getattr(wrapped, "zero_grad", None))
            ):
                return "the wrapper needs step() and zero_grad() methods"
            for _ in range(epochs):
                for mb in data.micro_batches(size):
                    (F.mse_loss(mine(mb.x), mb.y) / k).backward()
                    seen[0] += 1
                    held = flat_grads(list(mine.parameters()))
                    wrapped.step()
                    wrapped.zero_grad()
                    if (
                        seen[0] % k
                        and not torch.equal(held, flat_grads(list(mine.parameters())))
                        and not touched
                    ):
                        touched.append(seen[0])
    finally:
        hook.remove()
    if library.used:
        return (
            f"this exercise asks you to build Accelerate's trick yourself — your answer used "
            f"{library.used}: count the micro-batches in your own wrapper"
        )
    got = params_of(mine)
    want = run(Recipe(size, k), model, data, lr=0.05, epochs=epochs).params[-1]

    def same(a, b):
        return all(torch.allclose(a[n], b[n], rtol=1e-10, atol=1e-12) for n in b)

    if same(got, params_of(model)):
        return (
            "the parameters never changed: step() must reach the optimizer once per k micro-batches"
        )
    if not steps:  # the weights moved, yet the optimizer handed over never stepped
        return (
            "the parameters moved, but the optimizer your wrapper was given never stepped: "
            "step() must reach that optimizer's step() (a new optimizer has none of its state)"
        )
    if len(steps) != windows:
        return (
            f"with k = {k}, your answer called the optimizer's step() {plural(len(steps), 'time')} "
            f"({windows} expected) over {micro} micro-batches: step() and "
            "zero_grad() must act only when a window of k micro-batches is complete"
        )
    if touched:
        n = (touched[0] - 1) % k + 1
        return (
            f"with k = {k}, after micro-batch {n} of a window your wrapper's step() and "
            "zero_grad() changed .grad: inside a window they must leave it alone, so that .grad "
            "itself adds up the window (as Accelerate's optimizer does)"
        )
    late = sorted({(n - 1) % k + 1 for n in steps} - {k})
    if late:
        return (
            f"with k = {k} the optimizer stepped once per window, but after micro-batch {late[0]} "
            f"of a window, not micro-batch {k}: step right after a window's last backward"
        )
    if not same(got, want):
        return (
            f"with k = {k} the optimizer stepped once per window, but with the wrong gradient: "
            "zero_grad() must reach it only right after a real step, so each window starts from "
            "nothing"
        )
    return None
