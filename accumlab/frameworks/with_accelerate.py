"""Lesson 11: the real `accelerate` package, `Accelerator(gradient_accumulation_steps=k)`.

What the source says (accelerate 1.15, src/accelerate/accelerator.py): `Accelerator.backward`
divides every loss by `gradient_accumulation_steps` (except under DeepSpeed, which scales in its own
`engine.backward`); `accumulate()` sets `sync_gradients` every k-th batch and at the end of a
PREPARED dataloader; the prepared optimizer's `step` and `zero_grad`, and the prepared scheduler's
`step`, do nothing while `sync_gradients` is False. The runs below measure each of these.
"""

from __future__ import annotations

from torch.utils.data import DataLoader, TensorDataset

from .problem import Problem


def _loader(problem: Problem) -> DataLoader:
    data = problem.data
    return DataLoader(
        TensorDataset(data.x, data.y), batch_size=problem.micro_batch_size, shuffle=False
    )


def fresh_accelerator(k: int, *, reset_sync: bool = True):
    """`Accelerator(gradient_accumulation_steps=k, cpu=True)` as a new process would see it.

    Accelerate keeps `sync_gradients` in a process-wide GradientState that a new Accelerator does
    not reset: after a loop that ended mid-window, the next Accelerator in the same notebook starts
    with sync_gradients=False and its optimizer.step() outside accumulate() does nothing (measured
    in lesson 11). `reset_sync=False` keeps that inherited state, to show it.
    """
    from accelerate import Accelerator

    # cpu=True: the lesson's float64 comparison must not move to a GPU when one exists
    accelerator = Accelerator(gradient_accumulation_steps=k, cpu=True)
    if reset_sync:
        accelerator.sync_gradients = True  # a fresh process starts here
    return accelerator


def accelerate_loop(problem: Problem, model, optimizer, scheduler, folder: str) -> dict:
    """The loop of Accelerate's docs: mean loss, `accelerator.backward`, step/zero every batch."""
    accelerator = fresh_accelerator(problem.k)
    model, optimizer, loader, scheduler = accelerator.prepare(
        model, optimizer, _loader(problem), scheduler
    )
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = problem.mean_loss(model(x), y)
            accelerator.backward(loss)  # divides by k, the configured number
            optimizer.step()  # a no-op until sync_gradients
            scheduler.step()
            optimizer.zero_grad()
    return {}


def accelerate_global_loop(
    problem: Problem, model, optimizer, scheduler, folder: str, *, reset_sync: bool = True
) -> dict:
    """Accelerate's documented recipe for samples of variable size ("Gradient accumulation" usage
    guide): prefetch each window, count its items, and pass `sum × k ÷ items` to `backward`, so that
    backward's own ÷ k leaves exactly ÷ items — the short last window and token counts included."""
    k = problem.k
    accelerator = fresh_accelerator(k, reset_sync=reset_sync)
    model, optimizer, loader, scheduler = accelerator.prepare(
        model, optimizer, _loader(problem), scheduler
    )
    batches = iter(loader)
    for window in problem.windows():
        samples = [next(batches) for _ in window]
        items = sum(problem.items(y) for _, y in samples)
        for x, y in samples:
            loss = problem.sum_loss(model(x), y) * k / items  # × k undoes backward's ÷ k
            accelerator.backward(loss)
        optimizer.step()  # outside accumulate(): sync_gradients stays True, so it steps
        scheduler.step()
        optimizer.zero_grad()
    return {}


def accelerate_unprepared_loop(
    problem: Problem, model, optimizer, scheduler, folder: str, *, epochs: int = 1
) -> dict:
    """The docs' loop over a dataloader Accelerate never saw (not passed to `prepare`): nothing
    tells `accumulate()` that the epoch ended, so a short last window does not step at the end of
    the epoch — over several epochs it joins the next epoch's first micro-batches."""
    accelerator = fresh_accelerator(problem.k)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    for _ in range(epochs):
        for x, y in _loader(problem):
            with accelerator.accumulate(model):
                accelerator.backward(problem.mean_loss(model(x), y))
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
    return {}


def accelerate_custom_loop(
    problem: Problem, model, optimizer, scheduler, folder: str, *, epoch_fn
) -> dict:
    """Your own epoch under a real Accelerator(k): `epoch_fn(accelerator, model, optimizer,
    scheduler, loader, k)` gets everything prepared, the dataloader included (exercise 11.3)."""
    accelerator = fresh_accelerator(problem.k)
    model, optimizer, loader, scheduler = accelerator.prepare(
        model, optimizer, _loader(problem), scheduler
    )
    calls = []
    backward = accelerator.backward

    def counted(
        loss, **kwargs
    ):  # on this instance only: the exercise asks for Accelerate's backward
        calls.append(1)
        return backward(loss, **kwargs)

    accelerator.backward = counted
    epoch_fn(accelerator, model, optimizer, scheduler, loader, problem.k)
    return {"backward_calls": len(calls)}
