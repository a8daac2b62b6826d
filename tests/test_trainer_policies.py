"""Lesson 03's table of what popular trainers do with the short last window of an epoch, measured
on the real packages (CPU). Every sample is the same, so every micro-batch has the same gradient g
and a window of j micro-batches divided by d has the gradient (j / d)·g, whatever the shuffling:
the last window of 20 samples in micro-batches of 4 with k = 3 holds j = 2 micro-batches.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

pytestmark = pytest.mark.slow

X = torch.tensor([[1.0, 2.0, 3.0]]).repeat(20, 1)
Y = torch.full((20, 1), 0.5)


def _one_micro_batch_grad(linear: nn.Linear) -> torch.Tensor:
    return torch.autograd.grad(F.mse_loss(linear(X[:1]), Y[:1]), linear.weight)[0]


def test_lightning_divides_the_last_window_by_the_configured_k():
    L = pytest.importorskip("lightning")
    grads = []

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 1)

        def training_step(self, batch, index):
            return F.mse_loss(self.lin(batch[0]), batch[1])

        def on_before_optimizer_step(self, optimizer):
            grads.append(self.lin.weight.grad.clone())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    torch.manual_seed(0)
    module = Module()
    g = _one_micro_batch_grad(module.lin)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=4)
    trainer = L.Trainer(
        accumulate_grad_batches=3,
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, loader)
    assert len(grads) == 2  # it steps on the epoch's last batch
    assert torch.allclose(grads[0], g, rtol=1e-5) and torch.allclose(grads[1], g * 2 / 3, rtol=1e-5)


def test_transformers_trainer_divides_the_last_window_by_its_own_length(tmp_path):
    transformers = pytest.importorskip("transformers")
    grads = []

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 1)

        def forward(self, x, labels=None):
            out = self.lin(x)
            return {"loss": F.mse_loss(out, labels), "logits": out}

    class Samples(torch.utils.data.Dataset):
        def __len__(self):
            return len(X)

        def __getitem__(self, i):
            return {"x": X[i], "labels": Y[i]}

    class Grads(transformers.TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            grads.append(model.lin.weight.grad.clone())

    torch.manual_seed(0)
    model = Model()
    g = _one_micro_batch_grad(model.lin)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=3,
        num_train_epochs=1,
        learning_rate=0.0,
        max_grad_norm=0.0,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    transformers.Trainer(
        model=model, args=args, train_dataset=Samples(), callbacks=[Grads()]
    ).train()
    assert len(grads) == 2
    assert torch.allclose(grads[0], g, rtol=1e-5) and torch.allclose(grads[1], g, rtol=1e-5)


def test_transformers_num_items_in_batch_is_the_global_token_count():
    """transformers' own loss with num_items_in_batch = the window's real tokens gives every token
    1/N: the accumulated gradient is the full-batch gradient (lesson 03's 'global')."""
    pytest.importorskip("transformers")
    from transformers.loss.loss_utils import fixed_cross_entropy

    import accumlab as al

    data = al.token_data(lengths=[3, 14, 6, 9, 2, 16, 11, 5], vocab=16, seed=0)
    model = al.TinyLM(vocab=16, dim=8, seed=0)
    n_items = int((data.y != al.IGNORE_INDEX).sum())
    model.zero_grad(set_to_none=True)
    for mb in data.micro_batches(2):
        logits = model(mb.x)
        fixed_cross_entropy(
            logits.reshape(-1, 16), mb.y.reshape(-1), num_items_in_batch=n_items
        ).backward()
    full = al.full_batch_grads(model, data, loss="cross_entropy")
    assert al.grad_diff(al.grads_of(model), full).max_rel <= 1e-12
