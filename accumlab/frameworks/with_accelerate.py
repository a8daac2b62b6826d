"""Lesson 11: the real `accelerate` package, `Accelerator(gradient_accumulation_steps=k)`.

What the source says (the installed version, src/accelerate/accelerator.py and state.py):
`Accelerator.backward` divides every loss by `gradient_accumulation_steps` (except under DeepSpeed,
which scales in its own `engine.backward`); `accumulate()` sets `sync_gradients` every k-th call
and when a PREPARED dataloader has handed out its last batch and is still being iterated
(`GradientState.end_of_dataloader` is False once the loader is finished); the prepared optimizer's
`step` and `zero_grad`, and the prepared scheduler's `step`, do nothing while `sync_gradients` is
False. The runs below measure each of these.
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import torch
from torch.utils.data import DataLoader, Sampler, TensorDataset

from .. import _validate
from .problem import Problem


class ReshuffledMicroBatches(Sampler):
    """A batch sampler over the problem's micro-batches (the same samples in each) in an order
    drawn anew on every pass, from `seed`: a shuffled loader, whose second pass differs from its
    first. Shuffling micro-batches, not samples, keeps every batch one the hooks know."""

    def __init__(self, problem: Problem, seed: int):
        self.batches, self.size = len(problem.micro_batches()), problem.micro_batch_size
        self.generator = torch.Generator().manual_seed(
            _validate.positive_int("seed", seed, minimum=0)
        )

    def __len__(self) -> int:
        return self.batches

    def __iter__(self):
        for b in torch.randperm(self.batches, generator=self.generator).tolist():
            yield list(range(b * self.size, (b + 1) * self.size))


def _loader(problem: Problem, shuffle_seed: int | None = None) -> DataLoader:
    data = problem.data
    dataset = TensorDataset(data.x, data.y)
    if shuffle_seed is not None:
        return DataLoader(dataset, batch_sampler=ReshuffledMicroBatches(problem, shuffle_seed))
    return DataLoader(dataset, batch_size=problem.micro_batch_size, shuffle=False)


def fresh_accelerator(k: int, *, reset_sync: bool = True):
    """`Accelerator(gradient_accumulation_steps=k, cpu=True)` as a new process would see it.

    Accelerate keeps `sync_gradients` in a process-wide GradientState that a new Accelerator does
    not reset: after a loop that ended mid-window, the next Accelerator in the same notebook starts
    with sync_gradients=False and its optimizer.step() outside accumulate() does nothing (measured
    in lesson 11). The same state lists the prepared dataloaders being iterated (weakly): one left
    mid-iteration by an earlier loop, at its last batch, would make every accumulate() of the next
    Accelerator sync. `reset_sync=False` keeps that inherited state, to show it.
    """
    from accelerate import Accelerator

    # cpu=True: the lesson's float64 comparison must not move to a GPU when one exists
    accelerator = Accelerator(gradient_accumulation_steps=k, cpu=True)
    if reset_sync:  # a fresh process starts here
        accelerator.sync_gradients = True
        accelerator.gradient_state.dataloader_references = [None]  # no loader being iterated
    return accelerator


def accelerate_loop(problem: Problem, model, optimizer, scheduler, folder: str) -> dict:
    """The loop of Accelerate's docs: mean loss, `accelerator.backward`, step/zero every batch."""
    accelerator = fresh_accelerator(problem.k)
    model, optimizer, loader, scheduler = accelerator.prepare(
        model, optimizer, _loader(problem), scheduler
    )
    inner = scheduler.scheduler  # the torch scheduler the prepared one wraps
    counted, stepped = inner._step_count, inner.last_epoch
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = problem.mean_loss(model(x), y)
            accelerator.backward(loss)  # divides by k, the configured number
            optimizer.step()  # a no-op until sync_gradients
            scheduler.step()  # a no-op until sync_gradients (adjust_scheduler counts nothing)
            optimizer.zero_grad()
    # Accelerate logs only through the trackers `log_with=` sets up (none here): `accelerator.log`
    # goes nowhere without one
    return {
        "trackers": len(accelerator.trackers),
        # scheduler.step() calls the torch scheduler counted, and the updates it made
        "scheduler_counted": inner._step_count - counted,
        "scheduler_stepped": inner.last_epoch - stepped,
    }


def accelerate_global_loop(
    problem: Problem, model, optimizer, scheduler, folder: str, *, reset_sync: bool = True
) -> dict:
    """The usage guide's skeleton for samples of variable size ("Gradient accumulation"), as
    written: windows sized from `len(loader)` (the last one by the remainder), each prefetched and
    its items counted and gathered; `loss × k × num_processes ÷ items` to `backward`, whose own ÷ k
    leaves ÷ items; no `accumulate()` — on several processes `model.no_sync` around a window's
    non-final micro-batches — and one step after each window, where `sync_gradients` stays True,
    so the short last window steps too."""
    k = problem.k
    accelerator = fresh_accelerator(k, reset_sync=reset_sync)
    model, optimizer, loader, scheduler = accelerator.prepare(
        model, optimizer, _loader(problem), scheduler
    )
    iterator, batches = iter(loader), len(loader)
    remainder = batches % k or k
    total_updates = math.ceil(batches / k)
    for update_step in range(total_updates):
        size = k if update_step != total_updates - 1 else remainder
        samples = [next(iterator) for _ in range(size)]
        local = torch.tensor(sum(problem.items(y) for _, y in samples))
        items = accelerator.gather(local).sum().item()  # the guide: every process's items
        for i, (x, y) in enumerate(samples):
            several = i < len(samples) - 1 and accelerator.num_processes > 1
            with model.no_sync() if several else nullcontext():
                loss = problem.sum_loss(model(x), y)
                accelerator.backward(loss * k * accelerator.num_processes / items)
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


def accelerate_prefetch_loop(
    problem: Problem, model, optimizer, scheduler, folder: str, *, prefetch: str = "window"
) -> dict:
    """The docs' `accumulate()` loop, its batches fetched before their backward passes:
    `prefetch="window"` takes each window with `next()` just before it, `"all"` takes the whole
    epoch with `list(loader)` first. Either moves the moment the prepared loader reports its end."""
    _validate.one_of("prefetch", prefetch, ("window", "all"))
    accelerator = fresh_accelerator(problem.k)
    model, optimizer, loader, scheduler = accelerator.prepare(
        model, optimizer, _loader(problem), scheduler
    )
    batches = iter(loader) if prefetch == "window" else iter(list(loader))
    for window in problem.windows():
        samples = [next(batches) for _ in window]  # counted here, before any backward
        items = sum(problem.items(y) for _, y in samples)
        for x, y in samples:
            with accelerator.accumulate(model):
                accelerator.backward(problem.sum_loss(model(x), y) * problem.k / items)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
    return {}


def accelerate_handset_loop(problem: Problem, model, optimizer, scheduler, folder: str) -> dict:
    """A trap, not the guide: prefetch each window, count its items, `accumulate()` per
    micro-batch, `loss × k ÷ items`, and set `sync_gradients` by hand, as the Transformers Trainer
    does after its own prefetch — but True only when the micro-batches so far are a multiple of k
    (the Trainer also syncs at the epoch's last batch), which they never are in a short window."""
    k = problem.k
    accelerator = fresh_accelerator(k)
    model, optimizer, loader, scheduler = accelerator.prepare(
        model, optimizer, _loader(problem), scheduler
    )
    batches, done = iter(loader), 0
    for window in problem.windows():
        samples = [next(batches) for _ in window]
        items = sum(problem.items(y) for _, y in samples)
        for x, y in samples:
            done += 1
            with accelerator.accumulate(model):
                accelerator.gradient_state._set_sync_gradients(done % k == 0)  # the counter only
                accelerator.backward(problem.sum_loss(model(x), y) * k / items)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
    return {}
