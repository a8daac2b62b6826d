"""Loops whose bugs hide: two bugs at once, a silent GradScaler order, a zero_grad one line too
early, graphs kept alive, a logging forward, in-place changes to the data; two whose
difference the audit cannot name but describes: bfloat16 rounding, a normaliser that counts
padding; and PyTorch's float16 recipe, whose GradScaler skips the updates that overflow
(lesson 08)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def zero_grad_and_undivided(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()  # every iteration: only the window's last micro-batch survives
        loss = F.mse_loss(model(x), y)  # and it is not divided by k
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()


def zero_grad_before_step(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        (F.mse_loss(model(x), y) / window).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.zero_grad()
            optimizer.step()


def scheduler_before_optimizer(model, optimizer, batches, k, *, scheduler):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        (F.mse_loss(model(x), y) / window).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scheduler.step()
            optimizer.step()
            optimizer.zero_grad()


def unscale_and_update_every_micro_batch(model, optimizer, batches, k, *, scaler):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        scaler.scale(F.mse_loss(model(x), y) / window).backward()
        scaler.unscale_(optimizer)  # no error: update() below resets the scaler's bookkeeping
        scaler.update()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


def total_loss_keeps_graphs(model, optimizer, batches, k):
    total_loss = 0.0
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        total_loss += loss  # for the log; holds on to every graph
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()
    return float(total_loss)


def logging_forward_with_grad(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        (F.mse_loss(model(x), y) / window).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()
            train_loss = F.mse_loss(model(x), y).item()  # a log line, without torch.no_grad()
            assert train_loss >= 0


def normalises_in_place(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        x.sub_(x.mean(0)).div_(x.std(0) + 1e-8)  # in place: rewrites the caller's data
        window = min(k, len(batches) - (i - i % k))
        (F.mse_loss(model(x), y) / window).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def undivided_under_clipping(model, optimizer, batches, k, *, max_norm):
    for i, (x, y) in enumerate(batches):
        F.mse_loss(model(x), y).backward()  # not divided by k: hidden when clipping bites
        if (i + 1) % k == 0 or i + 1 == len(batches):
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            optimizer.zero_grad()


def bfloat16_autocast(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            prediction = model(x)
        loss = F.mse_loss(prediction.to(y.dtype), y) / window  # back to the targets' dtype
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def float16_autocast(model, optimizer, batches, k, *, scaler, scheduler):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        with torch.autocast("cpu", dtype=torch.float16):
            prediction = model(x)
        scaler.scale(F.mse_loss(prediction.float(), y) / window).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.step(optimizer)  # skips the update when the scaled gradients overflowed
            scaler.update()
            scheduler.step()
            optimizer.zero_grad()


def normaliser_counts_padding(model, optimizer, batches, k):
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        tokens = sum(y.numel() for _, y in window)
        for x, y in window:
            logits = model(x)
            loss = F.cross_entropy(
                logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum"
            )
            (loss / tokens).backward()
        optimizer.step()
        optimizer.zero_grad()
