"""Lesson 02's statements about Hugging Face Accelerate, measured on the real package (CPU).

`accelerator.accumulate(model)` with `step()` then `zero_grad()` on every iteration accumulates a
whole window; a `zero_grad()` at the TOP of the block erases the window's first k − 1 micro-batches,
because `sync_gradients` is True for the whole last iteration of a window; `accelerator.backward`
divides by the configured k, also for the short window at the end of the dataloader.
"""

import copy

import pytest
import torch
import torch.nn.functional as F

import accumlab as al

accelerate = pytest.importorskip("accelerate")

pytestmark = pytest.mark.slow


def _windows(zero_grad_at: str):
    from torch.utils.data import DataLoader, TensorDataset

    data = al.regression_data(n=20, features=3, seed=0)
    model = al.mlp(3, 4, 1, depth=1, seed=0)
    accelerator = accelerate.Accelerator(gradient_accumulation_steps=3, cpu=True)
    mine = copy.deepcopy(model)
    optimizer = torch.optim.SGD(mine.parameters(), lr=0.0)  # lr 0: read the gradients only
    loader = DataLoader(TensorDataset(data.x, data.y), batch_size=4)
    mine, optimizer, loader = accelerator.prepare(mine, optimizer, loader)
    seen = []
    for x, y in loader:
        if zero_grad_at == "before":  # outside the block: every window still accumulates
            optimizer.zero_grad()
        with accelerator.accumulate(mine):
            if zero_grad_at == "top":
                optimizer.zero_grad()
            accelerator.backward(F.mse_loss(mine(x), y))
            if accelerator.sync_gradients:  # the iteration whose step() reaches the optimizer
                seen.append({n: p.grad.clone() for n, p in mine.named_parameters()})
            optimizer.step()
            if zero_grad_at == "bottom":
                optimizer.zero_grad()
    return model, data, seen


def test_zero_grad_after_step_accumulates_the_window():
    model, data, seen = _windows("bottom")
    assert len(seen) == 2  # 5 micro-batches, k = 3: a full window and the dataloader's end
    assert al.grad_diff(seen[0], al.full_batch_grads(model, data[:12])).max_rel <= 1e-12
    # the short window at the end of the dataloader is stepped, divided by the configured k = 3
    short = al.full_batch_grads(model, data[12:])
    assert al.grad_diff(seen[1], {n: g * 2 / 3 for n, g in short.items()}).max_rel <= 1e-12


def test_zero_grad_at_the_top_keeps_only_the_last_micro_batch():
    model, data, seen = _windows("top")
    last = al.full_batch_grads(model, data[8:12])
    assert al.grad_diff(seen[0], {n: g / 3 for n, g in last.items()}).max_rel <= 1e-12
    assert al.grad_diff(seen[0], al.full_batch_grads(model, data[:12])).max_rel > 0.1


def test_zero_grad_before_the_accumulate_block_is_harmless():
    # AcceleratedOptimizer.zero_grad acts only when sync_gradients is True; before the block it
    # still holds the previous iteration's value, so only the zero_grad after a real step acts
    model, data, seen = _windows("before")
    assert len(seen) == 2
    assert al.grad_diff(seen[0], al.full_batch_grads(model, data[:12])).max_rel <= 1e-12
