"""Lesson 02's statements about Hugging Face Accelerate, measured on the real package (CPU).

`accelerator.accumulate(model)` with `step()` then `zero_grad()` on every iteration accumulates a
whole window; a `zero_grad()` at the TOP of the block erases the window's first k − 1 micro-batches,
because `sync_gradients` is True for the whole last iteration of a window; the MODEL's
`zero_grad()` is not wrapped and erases them too; `accelerator.backward` divides by the configured
k, also for the short window at the end of the dataloader.
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
            elif zero_grad_at == "model":  # the module's own zero_grad(): no sync_gradients check
                mine.zero_grad()
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


def test_the_models_zero_grad_after_step_keeps_only_the_last_micro_batch():
    # AcceleratedOptimizer.zero_grad checks sync_gradients; nn.Module.zero_grad does not
    model, data, seen = _windows("model")
    assert len(seen) == 2
    last = al.full_batch_grads(model, data[8:12])
    assert al.grad_diff(seen[0], {n: g / 3 for n, g in last.items()}).max_rel <= 1e-12
    assert al.grad_diff(seen[0], al.full_batch_grads(model, data[:12])).max_rel > 0.1


def test_the_lessons_placements_are_these_loops():
    """al.accumulation.accelerate_zero_grad_placements (lesson 02's cell) against the loops above,
    on whole windows (data[:12]: one window of 3 micro-batches of 4)."""
    model, data, _ = _windows("bottom")
    runs = al.accumulation.accelerate_zero_grad_placements(model, data[:12], 4, 3)
    assert runs["version"] == accelerate.__version__ and runs["k"] == 3
    assert al.grad_diff(runs["full"][0], al.full_batch_grads(model, data[:12])).max_rel == 0
    for placement, here in [
        ("after_step", "bottom"),
        ("before_block", "before"),
        ("top_of_block", "top"),
        ("model_after_step", "model"),
    ]:
        _, _, seen = _windows(here)
        stepped = runs["runs"][placement]["stepped"]
        assert len(stepped) == 1 and al.grad_diff(stepped[0], seen[0]).max_rel <= 1e-12, placement
    # what each acting zero_grad() erased: before the block, the window just stepped; at the top of
    # the block, the window's first k - 1 micro-batches (the full window minus its last one)
    before = runs["runs"]["before_block"]
    assert before["erased"] == [] and len(runs["runs"]["after_step"]["erased"]) == 1
    top = runs["runs"]["top_of_block"]["erased"][0]
    first_two = {n: g - runs["last"][0][n] for n, g in runs["full"][0].items()}
    assert al.grad_diff(top, first_two).max_rel <= 1e-12
    assert len(runs["runs"]["model_after_step"]["erased"]) == 3  # every iteration


def test_a_misplaced_block_steps_never_or_on_every_batch():
    """The block entered once around the whole loop: `_do_sync()` runs once, the flag is False and
    the real optimizer never steps. No block: the flag stays True, the real optimizer steps on
    every batch with that batch's gradient, still divided by k by `accelerator.backward`."""
    model, data, _ = _windows("bottom")
    runs = al.accumulation.accelerate_zero_grad_placements(
        model, data[:12], 4, 3, placements=("around_loop", "no_block", "after_step")
    )
    around, none, after = (runs["runs"][p] for p in ("around_loop", "no_block", "after_step"))
    assert around["stepped"] == [] and around["erased"] == [] and around["guarded"] == 0
    assert len(none["stepped"]) == 3 == none["guarded"] == len(none["erased"])
    for j, stepped in enumerate(none["stepped"]):
        alone = al.full_batch_grads(model, data[4 * j : 4 * j + 4])
        assert al.grad_diff(stepped, {n: g / 3 for n, g in alone.items()}).max_rel <= 1e-12
    assert len(after["stepped"]) == 1 == after["guarded"]  # the guard runs once per real step
