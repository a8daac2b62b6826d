"""fp16's skipped optimizer steps against the step count: a `GradScaler` that finds an inf or NaN
in the unscaled gradients skips `optimizer.step()`, and a loop that counts windows (as the
Transformers `Trainer` does) counts the skipped one too, while its scheduler steps only after a
real update. Lesson 10."""

from __future__ import annotations

import torch

from .._validate import positive_int


def skipped_step_counts(windows: int = 12, k: int = 4, overflow_in: tuple = (3, 7)) -> dict:
    """Run `windows` windows of `k` micro-batches through a real `torch.amp.GradScaler` (on the
    CPU) with one micro-batch's loss made infinite in each window of `overflow_in` (0-based), the
    way an fp16 overflow makes its gradient; count as the `Trainer` does: `global_step += 1` after
    every window, `scheduler.step()` only if the optimizer step was not skipped. The schedule is a
    linear decay to 0 sized for `windows` steps. Returns {"windows", "skipped", "global_step",
    "optimizer_steps" (AdamW's own `step`), "scheduler_steps", "last_lr_factor" (the decay's factor
    after the last window: 0 if every step had counted)}."""
    windows = positive_int("windows", windows)
    k = positive_int("k", k)
    overflow_in = tuple(overflow_in)
    for w in overflow_in:
        if not isinstance(w, int) or not 0 <= w < windows:
            raise ValueError(f"overflow_in must hold window indices in [0, {windows}), got {w!r}")
    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    decay = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, 1 - s / windows))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    global_step = skipped = 0
    for w in range(windows):
        for i in range(k):
            x = torch.randn(4, 3, generator=gen)
            loss = model(x).pow(2).mean() / k
            if w in overflow_in and i == k - 1:
                loss = loss * float("inf")  # what an fp16 overflow does to the gradient
            scaler.scale(loss).backward()
        scale = scaler.get_scale()
        scaler.step(optimizer)  # skips optimizer.step() when the gradients are not finite
        scaler.update()  # and then lowers the scale: how a loop can tell
        was_skipped = scaler.get_scale() < scale
        skipped += was_skipped
        if not was_skipped:  # the Trainer: `if not accelerator.optimizer_step_was_skipped`
            decay.step()
        optimizer.zero_grad(set_to_none=True)
        global_step += 1  # the Trainer: after every window, skipped or not
    steps = int(optimizer.state[model.weight]["step"])
    return {
        "windows": windows,
        "skipped": skipped,
        "global_step": global_step,
        "optimizer_steps": steps,
        "scheduler_steps": decay.last_epoch,
        "last_lr_factor": optimizer.param_groups[0]["lr"] / 0.1,
    }
