"""Lesson 11: right, wrong and unanswered answers for its exercises (see __init__.py)."""

from fractions import Fraction

import numpy as np
import torch
import torch.nn.functional as F

import accumlab as al

IGNORE = al.IGNORE_INDEX


def _summed_loss(outputs, labels, num_items_in_batch=None):
    """Another right 11.2: log-probabilities gathered by hand, summed, ÷ the window's count."""
    logp = outputs["logits"].log_softmax(-1)
    real = labels != IGNORE
    picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked * real).sum() / num_items_in_batch


def _sum_not_divided(outputs, labels, num_items_in_batch=None):
    logits = outputs["logits"]
    return F.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="sum"
    )


def _per_micro_batch_tokens(outputs, labels, num_items_in_batch=None):
    """Divides by this micro-batch's tokens: the mean of means again."""
    logits = outputs["logits"]
    total = F.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="sum"
    )
    return total / (labels != IGNORE).sum()


def _exact_with_tensor_count(accelerator, model, optimizer, scheduler, loader, k):
    """Another right 11.3: the count kept as a tensor, the window sliced from an iterator."""
    batches = iter(loader)
    remaining = len(loader)
    while remaining:
        window = [next(batches) for _ in range(min(k, remaining))]
        remaining -= len(window)
        tokens = sum((y != IGNORE).sum() for _, y in window)
        for x, y in window:
            loss = F.cross_entropy(
                model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE, reduction="sum"
            )
            accelerator.backward(loss * k / tokens)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()


def _plain_backward(accelerator, model, optimizer, scheduler, loader, k):
    """Exact numbers without Accelerate's backward: loss.backward() directly."""
    batches = list(loader)
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        tokens = sum(int((y != IGNORE).sum()) for _, y in window)
        for x, y in window:
            loss = F.cross_entropy(
                model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE, reduction="sum"
            )
            (loss / tokens).backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()


def _forgets_times_k(accelerator, model, optimizer, scheduler, loader, k):
    """÷ window tokens, but accelerator.backward divides by k once more."""
    batches = list(loader)
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        tokens = sum(int((y != IGNORE).sum()) for _, y in window)
        for x, y in window:
            loss = F.cross_entropy(
                model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE, reduction="sum"
            )
            accelerator.backward(loss / tokens)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()


def _stub_loss(outputs, labels, num_items_in_batch=None):
    # the usual mean loss, to change
    ...


def _stub_epoch(accelerator, model, optimizer, scheduler, loader, k):
    # the loop of Accelerate's docs, to change
    ...


RIGHT = {
    "11.1": [
        ("numpy and 3 digits", (np.int64(2), np.float64(0.667))),
        ("tensors and a fraction", (torch.tensor(2), Fraction(2, 3))),
    ],
    "11.2": [("log-probabilities gathered by hand", _summed_loss)],
    "11.3": [("tensor count, iterator windows", _exact_with_tensor_count)],
}
WRONG = {
    "11.1": [("k = 4's factor", (2, 0.5)), ("remainder never stepped", (1, 1.0))],
    "11.2": [
        ("sum, not divided", _sum_not_divided),
        ("÷ micro-batch tokens", _per_micro_batch_tokens),
    ],
    "11.3": [("skips accelerator.backward", _plain_backward), ("forgets × k", _forgets_times_k)],
}
STUBS = {
    "11.1": [("the lesson's cell", None)],
    "11.2": [("the lesson's cell", _stub_loss)],
    "11.3": [("the lesson's cell", _stub_epoch)],
}
