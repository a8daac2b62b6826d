"""Lesson 02: where `zero_grad()` may sit in Hugging Face Accelerate's loop, run on the real package.

Accelerate's loop calls `optimizer.step()` and `optimizer.zero_grad()` on every iteration. The
prepared optimizer (`AcceleratedOptimizer`) passes both on only while
`accelerator.sync_gradients` is True, which `accumulate()` sets as the block is entered, on a
window's last micro-batch. The model's own `zero_grad()` is not wrapped: it always acts. A block
entered once around the whole loop sets the flag once (False: no step); without a block it stays
True (a step on every batch, each loss still ÷ k).
`accelerate` is imported only inside the function: `al.accumulation` stays cheap.
"""

from __future__ import annotations

import contextlib
import copy

import torch
from torch import nn

from .. import _validate
from .._validate import one_of, positive_int
from ..data import Data
from ..losses import get_loss
from ..reference import full_batch_grads

# each placement: where the loop below calls which zero_grad()
ACCELERATE_PLACEMENTS = {
    "after_step": "optimizer.zero_grad() after optimizer.step(), inside the block",
    "before_block": "optimizer.zero_grad() before `with accelerator.accumulate(model):`",
    "top_of_block": "optimizer.zero_grad() first thing inside the block",
    "model_after_step": "model.zero_grad() after optimizer.step(), inside the block",
    # two misplaced blocks, each with the optimizer's zero_grad() after step()
    "around_loop": "`with accelerator.accumulate(model):` around the whole for loop",
    "no_block": "no accumulate() block at all",
}
MAX_MICRO_BATCHES = 4096  # a lesson's loop: one process, a few windows


def _grads(model: nn.Module) -> dict | None:
    grads = {n: p.grad for n, p in model.named_parameters()}
    if all(g is None for g in grads.values()):
        return None
    return {n: (torch.zeros_like(p) if g is None else g.detach().clone()) for (n, p), g in
            zip(model.named_parameters(), grads.values())}  # fmt: skip


def _zero(zero_grad, model: nn.Module, erased: list) -> None:
    """Call `zero_grad`; when it really cleared `.grad`, keep what `.grad` held just before."""
    before = _grads(model)
    zero_grad()
    if before is not None and _grads(model) is None:
        erased.append(before)


def accelerate_zero_grad_placements(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    k: int,
    *,
    placements=tuple(ACCELERATE_PLACEMENTS),
    loss: str = "mse",
) -> dict:
    """Lesson 02: Accelerate's documented loop (`Accelerator(gradient_accumulation_steps=k,
    cpu=True)`, a prepared SGD optimizer and DataLoader of `micro_batch_size`, `accumulate()`,
    `accelerator.backward(mean loss)`, `step()` every iteration) once per placement of
    `zero_grad()` (see `ACCELERATE_PLACEMENTS`), on a copy of `model`. The learning rate is 0, so every
    window's gradient is taken at `model`'s weights and compares with the full-batch gradient
    of the window's samples.

    Returns {"version" (accelerate's), "k", "full": [full-batch gradient of each window],
    "last": [each window's last micro-batch gradient ÷ k], "runs": {placement: {"stepped":
    [.grad each time the real optimizer's step() ran, seen by its step pre-hook], "erased":
    [what `.grad` held each time a zero_grad() call really cleared it], "guarded": how many
    times `if accelerator.sync_gradients:` let once-per-window work (a clip) run}}};
    gradients are {name: tensor}.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    positive_int("micro_batch_size", micro_batch_size)
    positive_int("k", k, minimum=2)
    window = micro_batch_size * k
    if len(data) < window or len(data) % window:
        raise ValueError(
            f"micro_batch_size × k = {window} must split data's {len(data)} samples into whole "
            "windows (at least one)"
        )
    positive_int(
        "len(data) // micro_batch_size", len(data) // micro_batch_size,
        maximum=MAX_MICRO_BATCHES, why="micro-batches of one lesson loop",
    )  # fmt: skip
    chosen = [
        one_of("placements", p, ACCELERATE_PLACEMENTS)
        for p in _validate.sequence("placements", placements)
    ]
    loss_fn = get_loss(loss)
    import accelerate

    starts = range(0, len(data), window)
    last = data.micro_batches(micro_batch_size)
    last = [last[(s + window) // micro_batch_size - 1] for s in starts]
    out = {
        "version": accelerate.__version__,
        "k": k,
        "full": [full_batch_grads(model, data[s : s + window], loss=loss) for s in starts],
        "last": [
            {n: g / k for n, g in full_batch_grads(model, mb, loss=loss).items()} for mb in last
        ],
        "runs": {},
    }
    for placement in chosen:
        out["runs"][placement] = _run(
            accelerate, model, data, micro_batch_size, k, placement, loss_fn
        )
    return out


def _run(accelerate, model, data, micro_batch_size, k, placement, loss_fn) -> dict:
    from torch.utils.data import DataLoader, TensorDataset

    accelerator = accelerate.Accelerator(gradient_accumulation_steps=k, cpu=True)
    # the gradient state is process-wide and outlives an Accelerator: start as a new process does
    accelerator.gradient_state._set_sync_gradients(True)
    accelerator.gradient_state.dataloader_references = [None]
    mine = copy.deepcopy(model)
    optimizer = torch.optim.SGD(mine.parameters(), lr=0.0)  # lr 0: read the gradients only
    loader = DataLoader(TensorDataset(data.x, data.y), batch_size=micro_batch_size)
    mine, optimizer, loader = accelerator.prepare(mine, optimizer, loader)
    stepped, erased, guarded = [], [], 0
    # the real optimizer's own hook: it sees the steps that reach it, not the calls to the wrapper
    optimizer.optimizer.register_step_pre_hook(lambda *_: stepped.append(_grads(mine)))
    nothing = contextlib.nullcontext
    outer = accelerator.accumulate(mine) if placement == "around_loop" else nothing()
    unblocked = placement in ("around_loop", "no_block")
    per_batch = (lambda _model: nothing()) if unblocked else accelerator.accumulate
    with outer:
        for x, y in loader:
            if placement == "before_block":
                _zero(optimizer.zero_grad, mine, erased)
            with per_batch(mine):
                if placement == "top_of_block":
                    _zero(optimizer.zero_grad, mine, erased)
                total, count = loss_fn(mine(x), y)
                accelerator.backward(total / count)  # the mean loss; backward divides it by k
                if accelerator.sync_gradients:  # where the guide puts once-per-window work
                    accelerator.clip_grad_norm_(mine.parameters(), float("inf"))  # measures only
                    guarded += 1
                optimizer.step()
                if placement == "model_after_step":
                    _zero(mine.zero_grad, mine, erased)
                elif placement not in ("top_of_block", "before_block"):
                    _zero(optimizer.zero_grad, mine, erased)
    return {"stepped": stepped, "erased": erased, "guarded": guarded}
