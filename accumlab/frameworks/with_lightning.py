"""Lesson 11: the real Lightning `Trainer(accumulate_grad_batches=k)` on the CPU.

What the source says (the installed version, src/lightning/pytorch/loops/optimization/automatic.py
and loops/training_epoch_loop.py): `ClosureResult.from_training_step_output` divides the loss
`training_step` returns by `accumulate_grad_batches`; the optimizer steps when the count of batches
reaches a multiple of k OR at the epoch's last batch (`_should_accumulate`) — the last unless the
strategy handles accumulation itself (`handles_gradient_accumulation`: DeepSpeed's does) — so the
short last window steps, still divided by k (Lightning issue #19987); `zero_grad` runs inside the
closure of each window's FIRST batch, after its forward and before its backward; a scheduler with
`interval="step"` steps once per optimizer step. The runs below measure each of these.
"""

from __future__ import annotations

from torch.utils.data import DataLoader

from .. import _validate
from .problem import Problem
from .quiet import quiet_loggers


def _classes():
    """Lightning's base classes, imported on first use (seconds of import time)."""
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import Logger

    class MemoryLogger(Logger):
        """Keeps every `log_metrics` call: what a TensorBoard or CSV logger would have written."""

        def __init__(self):
            super().__init__()
            self.rows: list[tuple[int, dict]] = []

        @property
        def name(self) -> str:
            return "memory"

        @property
        def version(self) -> int:
            return 0

        def log_metrics(self, metrics, step=None) -> None:
            self.rows.append((step, dict(metrics)))

        def log_hyperparams(self, *args, **kwargs) -> None:
            pass

    class Module(pl.LightningModule):
        """The smallest LightningModule: the micro-batch MEAN loss, logged on every step."""

        def __init__(
            self, net, problem: Problem, optimizer, scheduler, exact: bool, frequency: int
        ):
            super().__init__()
            self.net = net
            self.frequency = frequency
            self.problem = problem
            self.exact = exact
            self._optimizer, self._scheduler = optimizer, scheduler
            self.callback_losses: list[float] = []  # outputs["loss"] at on_train_batch_end

        def training_step(self, batch, batch_idx):
            x, y, window_items = batch  # the count travels with the batch (see _loader)
            pred = self.net(x)
            loss = self.problem.mean_loss(pred, y)
            self.log("train_loss", loss, on_step=True, on_epoch=False)
            if self.exact:
                # × k undoes Lightning's own ÷ k; ÷ items weighs every item of the window alike
                return self.problem.sum_loss(pred, y) * self.problem.k / window_items
            return loss

        def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
            self.callback_losses.append(float(outputs["loss"]))

        def configure_optimizers(self):
            scheduler = {
                "scheduler": self._scheduler,
                "interval": "step",
                "frequency": self.frequency,
            }
            return {"optimizer": self._optimizer, "lr_scheduler": scheduler}

    return pl, MemoryLogger, Module


def _loader(problem: Problem) -> list:
    """One (x, y, items in this batch's window) per micro-batch: `training_step` sees one batch at
    a time, so the window's count must travel with the data. Counted here when the data is laid
    out, as a collate function or a sampler that knows the windows would; Lightning is not
    asked for anything it does not give."""
    batches = problem.micro_batches()
    out = []
    for window in problem.windows():
        items = sum(problem.items(batches[i].y) for i in window)
        out.extend((batches[i].x, batches[i].y, items) for i in window)
    return out


def _run(
    problem: Problem, model, optimizer, scheduler, folder: str, exact: bool, frequency: int = 1
) -> dict:
    frequency = _validate.positive_int("frequency", frequency)
    pl, MemoryLogger, Module = _classes()
    logger = MemoryLogger()
    module = Module(model, problem, optimizer, scheduler, exact, frequency)
    loader = DataLoader(_loader(problem), batch_size=None, shuffle=False)  # batches as laid out
    with quiet_loggers("lightning.pytorch", "lightning.fabric"):  # "GPU available: False", ...
        trainer = pl.Trainer(
            accelerator="cpu",
            devices=1,
            max_epochs=1,
            accumulate_grad_batches=problem.k,
            precision="64-true",  # the lesson's float64 model stays float64
            logger=logger,
            log_every_n_steps=1,
            enable_checkpointing=False,  # nothing written to disk
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=folder,
        )
        trainer.fit(module, train_dataloaders=loader)
    logged = [row["train_loss"] for _, row in logger.rows if "train_loss" in row]
    return {"loss": [float(v) for v in logged], "callback_loss": module.callback_losses}


def lightning_loop(
    problem: Problem, model, optimizer, scheduler, folder: str, *, frequency: int = 1
) -> dict:
    """`Trainer(accumulate_grad_batches=k)` with a `training_step` returning the mean loss; the
    scheduler's `frequency` (Lightning's default 1) can be changed, to show what it counts."""
    return _run(problem, model, optimizer, scheduler, folder, exact=False, frequency=frequency)


def lightning_exact_loop(problem: Problem, model, optimizer, scheduler, folder: str) -> dict:
    """The same Trainer, `training_step` returning sum × k ÷ (items in the window), the count
    carried by each batch."""
    return _run(problem, model, optimizer, scheduler, folder, exact=True)
