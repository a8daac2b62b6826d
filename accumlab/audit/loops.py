"""Accumulation loops, right and wrong, as a learner would write them (lesson 08).

Each trains one epoch: `fn(model, optimizer, batches, k, **extras)` with `batches` a list of
`(x, y)` micro-batches. `catalogue.py` says which finding codes the audit must report for each.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# ------------------------------------------------------------------------------- right loops


def correct_loop(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        start = i - i % k
        window = min(k, len(batches) - start)  # the last window may hold fewer than k
        # the mean of the window's micro-batches: every sample weighs the same only while every
        # micro-batch holds as many samples (the regression setup's 4; exercise 08.2's are not)
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


# ------------------------------------------------------------------------------- buggy loops


def loss_not_divided(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def zero_grad_inside_window(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()


def mystery_loop(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()


def step_every_micro_batch(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def off_by_one_schedule(model, optimizer, batches, k):
    for step, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (step - step % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        if step % k != 0:
            continue
        optimizer.step()
        optimizer.zero_grad()


def last_window_underweighted(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        loss = F.mse_loss(model(x), y) / k
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def mean_of_means(model, optimizer, batches, k):
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        for x, y in window:
            logits = model(x)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100)
            (loss / len(window)).backward()
        optimizer.step()
        optimizer.zero_grad()


def clip_every_micro_batch(model, optimizer, batches, k, *, max_norm):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def scheduler_every_micro_batch(model, optimizer, batches, k, *, scheduler):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        scheduler.step()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def unscale_every_micro_batch(model, optimizer, batches, k, *, scaler, max_norm):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


def clip_before_unscale(model, optimizer, batches, k, *, scaler, max_norm):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        scaler.scale(loss).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


def scaler_update_every_micro_batch(model, optimizer, batches, k, *, scaler):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        scaler.scale(loss).backward()
        scaler.update()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.step(optimizer)
            optimizer.zero_grad()


def scaler_step_skipped(model, optimizer, batches, k, *, scaler, max_norm):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        scaler.scale(loss).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            scaler.update()
            optimizer.zero_grad()


def loss_divided_twice(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            for p in model.parameters():
                p.grad /= window
            optimizer.step()
            optimizer.zero_grad()


def stray_factor(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = 0.7 * F.mse_loss(model(x), y) / window
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


# ------------------------------------------------------------------------------- bad input


def raises(model, optimizer, batches, k):
    total = 0.0
    for i, (x, y) in enumerate(batches):
        total = total + F.mse_loss(model(x), y) / k  # the running total keeps every graph
        total.backward()  # the second call goes back through the first, already freed, graph
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()


def calls_model_forward(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model.forward(x), y) / window  # forward() skips the model's hooks
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def builds_its_own_optimizer(model, optimizer, batches, k):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # the audited optimizer never steps
    for i, (x, y) in enumerate(batches):
        (F.mse_loss(model(x), y) / k).backward()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()


def replaces_a_layer(model, optimizer, batches, k):
    model[-1] = nn.Linear(model[-1].in_features, 2, dtype=torch.float64)  # a new head
    for x, y in batches:
        F.mse_loss(model(x)[:, :1], y).backward()
    optimizer.step()


def trains_until_perfect(model, optimizer, batches, k):
    loss = torch.tensor(1.0)
    while loss.item() > 0:  # a float loss never reaches exactly 0
        for x, y in batches:
            loss = F.mse_loss(model(x), y) / len(batches)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
