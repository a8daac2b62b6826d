"""Solutions to lesson 08's exercises (and a wrong answer for each, so the tests see checkers fail)."""

import torch
import torch.nn.functional as F

import accumlab as al


def token_loop(model, optimizer, batches, k):
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        tokens = sum(int((y != -100).sum()) for _, y in window)  # real tokens in the whole window
        for x, y in window:
            logits = model(x)
            loss = F.cross_entropy(
                logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum"
            )
            (loss / tokens).backward()  # every token weighs 1 / tokens
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
    "08.1": "GRADS_NEVER_ZEROED",
    "08.2": token_loop,
    "08.3": full_loop,
}

WRONG = {
    "08.1": "LOSS_NOT_DIVIDED",
    "08.2": al.audit.catalogue_loop("mean_of_means").fn,
    "08.3": al.audit.catalogue_loop("clip_before_unscale").fn,
}
