"""Corpus loops that run the real Accelerate and Lightning (see __init__.py for the adaptation).

The framework gets the audit's model, optimizer and scheduler, and a DataLoader over the audit's
micro-batches (batch_size=None: each item already is a micro-batch). Accelerate keeps process-wide
state between Accelerator objects, so each loop resets it first.
"""

import lightning as L  # imported here, not inside a loop: the audit's time limit is the loop's
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState
from torch.utils.data import DataLoader

loss_function = F.mse_loss


def _accelerator(**kwargs):
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    return Accelerator(cpu=True, **kwargs)


# https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation (the loop converted
# to Accelerate before accumulate() is introduced: the loss is divided by hand)
def accelerate_manual(model, optimizer, batches, k, *, scheduler):
    accelerator = _accelerator()
    gradient_accumulation_steps = k
    training_dataloader = DataLoader(batches, batch_size=None)
    model, optimizer, training_dataloader, scheduler = accelerator.prepare(
        model, optimizer, training_dataloader, scheduler
    )
    for index, batch in enumerate(training_dataloader):
        inputs, targets = batch
        outputs = model(inputs)
        loss = loss_function(outputs, targets)
        loss = loss / gradient_accumulation_steps
        accelerator.backward(loss)
        if (index + 1) % gradient_accumulation_steps == 0:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


# https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation (with
# accelerator.accumulate: Accelerator.backward divides every loss by gradient_accumulation_steps)
def accelerate_accumulate(model, optimizer, batches, k, *, scheduler):
    accelerator = _accelerator(gradient_accumulation_steps=k)
    training_dataloader = DataLoader(batches, batch_size=None)
    model, optimizer, training_dataloader, scheduler = accelerator.prepare(
        model, optimizer, training_dataloader, scheduler
    )
    for batch in training_dataloader:
        with accelerator.accumulate(model):
            inputs, targets = batch
            outputs = model(inputs)
            loss = loss_function(outputs, targets)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


# https://huggingface.co/spaces/hf-accelerate/accelerate_examples (code_samples/
# gradient_accumulation): optimizer.zero_grad() first inside accumulate()
def accelerate_examples_space(model, optimizer, batches, k, *, scheduler):
    accelerator = _accelerator(gradient_accumulation_steps=k)
    dataloader = DataLoader(batches, batch_size=None)
    dataloader, model, optimizer, scheduler = accelerator.prepare(
        dataloader, model, optimizer, scheduler
    )
    for batch in dataloader:
        with accelerator.accumulate(model):
            optimizer.zero_grad()
            inputs, targets = batch
            outputs = model(inputs)
            loss = loss_function(outputs, targets)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()


# https://github.com/huggingface/accelerate/issues/641 (the reporter's train_one_epoch: zero_grad
# first, accelerator.clip_grad_norm_ after every backward)
def accelerate_issue_641(model, optimizer, batches, k, *, scheduler, max_norm):
    accelerator = _accelerator(gradient_accumulation_steps=k)
    dataloader = DataLoader(batches, batch_size=None)
    model, optimizer, dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, dataloader, scheduler
    )
    for _step, batch in enumerate(dataloader):
        with accelerator.accumulate(model):
            optimizer.zero_grad()
            loss = loss_function(model(batch[0]), batch[1])
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            lr_scheduler.step()


def _lightning_fit(module, batches, **trainer_kwargs):
    trainer = L.Trainer(
        max_epochs=1,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        **trainer_kwargs,
    )
    trainer.fit(module, train_dataloaders=DataLoader(batches, batch_size=None))


# https://lightning.ai/docs/pytorch/stable/common/trainer.html#accumulate-grad-batches
# (Trainer(accumulate_grad_batches=k) with automatic optimization)
def lightning_accumulate_grad_batches(model, optimizer, batches, k):
    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model

        def training_step(self, batch, batch_idx):
            x, y = batch
            return loss_function(self.model(x), y)

        def configure_optimizers(self):
            return optimizer

    _lightning_fit(Module(), batches, accumulate_grad_batches=k)


# https://lightning.ai/docs/pytorch/stable/model/manual_optimization.html ("Gradient
# accumulation": loss / N, a step when (batch_idx + 1) % N == 0)
def lightning_manual(model, optimizer, batches, k):
    N = k

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False
            self.model = model

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            # scale losses by 1/N (for N batches of gradient accumulation)
            loss = loss_function(self.model(batch[0]), batch[1]) / N
            self.manual_backward(loss)
            # accumulate gradients of N batches
            if (batch_idx + 1) % N == 0:
                opt.step()
                opt.zero_grad()

        def configure_optimizers(self):
            return optimizer

    _lightning_fit(Module(), batches)
