"""Solutions to lesson 02's exercises (kept apart from the lesson)."""

import torch.nn.functional as F


def accumulate(model, data, micro_batch_size):
    micro_batches = data.micro_batches(micro_batch_size)
    model.zero_grad()
    for mb in micro_batches:
        loss = F.mse_loss(model(mb.x), mb.y)
        (loss / len(micro_batches)).backward()  # mean of k equal-size means = full-batch mean


def accumulate_undivided(model, data, micro_batch_size):
    for mb in data.micro_batches(micro_batch_size):
        F.mse_loss(model(mb.x), mb.y).backward()


def fixed_epoch(model, optimizer, data, micro_batch_size, k):
    optimizer.zero_grad()
    for i, mb in enumerate(data.micro_batches(micro_batch_size)):
        (F.mse_loss(model(mb.x), mb.y) / k).backward()
        if (i + 1) % k == 0:  # 1-based count: step after micro-batches k, 2k, ...
            optimizer.step()
            optimizer.zero_grad()


def zero_every_iteration(model, optimizer, data, micro_batch_size, k):
    for i, mb in enumerate(data.micro_batches(micro_batch_size)):
        optimizer.zero_grad()  # the bug: erases the earlier micro-batches of the window
        (F.mse_loss(model(mb.x), mb.y) / k).backward()
        if (i + 1) % k == 0:
            optimizer.step()


SOLUTIONS = {"02.1": -40.0, "02.2": accumulate, "02.3": fixed_epoch}
WRONG = {"02.1": -20.0, "02.2": accumulate_undivided, "02.3": zero_every_iteration}
