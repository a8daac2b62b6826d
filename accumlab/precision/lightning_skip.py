"""What the real Lightning does to the scheduler (lesson 06): when GradScaler skips a step (a
`Trainer` with Lightning's own AMP plugin, `MixedPrecision("16-mixed", "cpu", scaler=...)`, the
plugin `precision="16-mixed"` builds on a GPU, and an infinite loss at one step), and what a
scheduler's `frequency` counts under `accumulate_grad_batches`."""

from __future__ import annotations

import logging
import warnings

import torch

from .._validate import positive_int


def lightning_on_skip(skip_step: int = 1, steps: int = 4) -> dict:
    """Train a linear model for `steps` optimizer steps with Lightning's AMP plugin, a GradScaler
    and a per-step LambdaLR (lr 1, 1/2, 1/3, ...); the loss of `skip_step` is infinite. Returns
    {"lrs": the lr each step used, "skipped": [bool per step, from the scaler's scale], "finite":
    weights finite at the end, "schedule": the lrs as written, "version": Lightning's}."""
    import lightning as L
    from lightning.pytorch.plugins import MixedPrecision

    steps = positive_int("steps", steps, maximum=64, why="one line of the lesson's table per step")
    skip_step = positive_int(
        "skip_step", skip_step, minimum=0, maximum=steps - 1, why="a step of the run"
    )
    lam = lambda s: 1.0 / (s + 1)  # noqa: E731 — lr 1, 1/2, 1/3, ... per scheduler step
    seen = {"lrs": [], "scales": []}

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch, i):
            opt = self.trainer.optimizers[0]
            seen["lrs"].append(opt.param_groups[0]["lr"])
            seen["scales"].append(self.trainer.precision_plugin.scaler.get_scale())
            loss = torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])
            return loss * (float("inf") if i == skip_step else 1.0)

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=1.0)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    gen = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(
        torch.randn(steps, 2, generator=gen), torch.randn(steps, 1, generator=gen)
    )
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    module = Module()
    quiet = logging.getLogger("lightning.pytorch")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its banner lines (GPU available, ...) say nothing here
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # num_workers, the ordering warning of a skipped step
            trainer = L.Trainer(
                accelerator="cpu", devices=1, max_epochs=1,
                plugins=[MixedPrecision("16-mixed", "cpu", scaler=scaler)],
                logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False,
            )  # fmt: skip
            trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=1))
    finally:
        quiet.setLevel(level)
    scales = [*seen["scales"], scaler.get_scale()]
    return {
        "lrs": seen["lrs"],
        # GradScaler halves the scale after a skipped step and keeps it otherwise (growth_interval
        # 2000 here): a step was skipped exactly when the scale went down after it
        "skipped": [b < a for a, b in zip(scales, scales[1:], strict=False)],
        "finite": bool(all(torch.isfinite(p).all() for p in module.parameters())),
        "schedule": [lam(s) for s in range(steps)],
        "version": L.__version__,
    }


def lightning_frequency(accumulate: int = 4, frequency: int = 2, batches: int = 16) -> dict:
    """A Lightning `Trainer` with `accumulate_grad_batches=accumulate` and a scheduler configured
    with `"interval": "step", "frequency": frequency`, over `batches` batches. Lightning steps the
    scheduler on optimizer steps whose batch count (batch_idx + 1) is a multiple of `frequency`:
    the frequency counts batches, not optimizer steps. Returns {"optimizer_steps",
    "scheduler_steps", "version"}."""
    import lightning as L

    accumulate = positive_int("accumulate", accumulate, maximum=64, why="a tiny demonstration")
    frequency = positive_int("frequency", frequency, maximum=64, why="a tiny demonstration")
    batches = positive_int("batches", batches, maximum=256, why="a tiny demonstration")
    calls = []

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch, i):
            return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: calls.append(s) or 1.0)
            config = {"scheduler": sched, "interval": "step", "frequency": frequency}
            return {"optimizer": opt, "lr_scheduler": config}

    gen = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(
        torch.randn(batches, 2, generator=gen), torch.randn(batches, 1, generator=gen)
    )
    quiet = logging.getLogger("lightning.pytorch")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # num_workers
            trainer = L.Trainer(
                accelerator="cpu", devices=1, max_epochs=1, accumulate_grad_batches=accumulate,
                logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False,
            )  # fmt: skip
            trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=1))
    finally:
        quiet.setLevel(level)
    # LambdaLR calls its function once when built, then once per scheduler.step()
    return {
        "optimizer_steps": trainer.global_step,
        "scheduler_steps": len(calls) - 1,
        "version": L.__version__,
    }
