"""Solutions to lesson 08's exercises (and a wrong answer for each, so the tests see checkers fail)."""

import torch
import torch.nn.functional as F

import accumlab as al


def fixed_mystery_loop(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()  # the line the mystery loop lacks: each window starts from 0


def sample_loop(model, optimizer, batches, k):
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        samples = sum(len(y) for _, y in window)  # the whole window's samples, 3 + 1 at the end
        for x, y in window:
            loss = F.mse_loss(model(x), y, reduction="sum")
            (loss / samples).backward()  # every sample weighs 1 / samples
        optimizer.step()
        optimizer.zero_grad()


def token_loop(model, optimizer, batches, k):
    """Section 5's fix on the tokens setup: every real token weighs 1 / the window's real tokens."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        tokens = sum(int((y != -100).sum()) for _, y in window)
        for x, y in window:
            loss = F.cross_entropy(
                model(x).flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum"
            )
            (loss / tokens).backward()
        optimizer.step()
        optimizer.zero_grad()


def full_loop(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))  # the last window may be short
        loss = F.mse_loss(model(x), y) / window
        scaler.scale(loss).backward()  # one scale for the whole window
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.unscale_(optimizer)  # once per optimizer step, before clipping
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()  # once per optimizer step
            optimizer.zero_grad()


SOLUTIONS = {
    "08.1": fixed_mystery_loop,
    "08.2": sample_loop,
    "08.3": full_loop,
}

WRONG = {
    "08.1": al.audit.catalogue_loop("mystery_loop").fn,  # unfixed
    "08.2": al.audit.catalogue_loop("correct_loop").fn,  # the mean of means on this data
    "08.3": al.audit.catalogue_loop("clip_before_unscale").fn,
}
