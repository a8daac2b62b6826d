"""Loops whose short last window meets the next epoch (lesson 08): a step counter that restarts
with every epoch or runs across epochs, with or without zeroing the gradients when an epoch
starts. Each call trains one epoch; the two whose counter runs across epochs are classes, so the
audit makes one instance per run and calls it once per epoch."""

from __future__ import annotations

import torch.nn.functional as F


def last_window_carried(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches, 1):
        loss = F.mse_loss(model(x), y) / k
        loss.backward()
        if i % k == 0:
            optimizer.step()
            optimizer.zero_grad()


def last_window_dropped(model, optimizer, batches, k):
    optimizer.zero_grad()
    for i, (x, y) in enumerate(batches, 1):
        loss = F.mse_loss(model(x), y) / k
        loss.backward()
        if i % k == 0:
            optimizer.step()
            optimizer.zero_grad()


class WindowsAcrossEpochs:
    def __init__(self):
        self.count = 0  # micro-batches since the last optimizer step, whatever the epoch

    def __call__(self, model, optimizer, batches, k):
        for x, y in batches:
            loss = F.mse_loss(model(x), y) / k
            loss.backward()
            self.count += 1
            if self.count == k:
                optimizer.step()
                optimizer.zero_grad()
                self.count = 0


class CountAcrossEpochs:
    def __init__(self):
        self.epoch, self.last_step = 0, -1

    def __call__(self, model, optimizer, batches, k):
        optimizer.zero_grad()
        for i, (x, y) in enumerate(batches):
            step = i + len(batches) * self.epoch  # micro-batches since training began
            loss = F.mse_loss(model(x), y) / k
            loss.backward()
            if step - self.last_step >= k:
                optimizer.step()
                optimizer.zero_grad()
                self.last_step = step
        self.epoch += 1
