"""One optimizer step over a window of micro-batches, written the way a training script would
(lesson 05). Memory and timing measurements run this lean loop rather than `al.run`, which also
records a Trace; benchmarks/engine_overhead.py compares the two."""

from __future__ import annotations

import torch
from torch import nn

from ..data import Data
from ..losses import Loss, get_loss


def device_of(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    micro_batches: list[Data],
    loss: str | Loss = "mse",
) -> torch.Tensor:
    """zero → (forward, loss / k, backward) per micro-batch → step. Returns the window's summed loss
    as a detached tensor: no `.item()` inside the loop, so a GPU never waits for the CPU here."""
    loss_fn = get_loss(loss)
    k = len(micro_batches)
    optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), device=device_of(model))
    for mb in micro_batches:
        loss_sum, count = loss_fn(model(mb.x), mb.y)
        (loss_sum / count / k).backward()  # loss / k: the window's gradient is the mean of k means
        total += loss_sum.detach()  # detached: the running total must not keep each graph alive
    optimizer.step()
    return total


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so a timer or a peak-memory reading sees all of it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
