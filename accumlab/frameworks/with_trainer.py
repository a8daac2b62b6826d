"""Lesson 11: the real Transformers `Trainer(gradient_accumulation_steps=k)` on a tiny `nn.Module`.

What the source says (the installed version, src/transformers/trainer.py): the Trainer prefetches
each window's batches (`get_batch_samples`) and counts the window's labels that are not -100
(`num_items_in_batch`, the 2024 fix; over `labels[..., 1:]` for models whose loss is
`ForCausalLMLoss`; with several processes, gathered over them when `average_tokens_across_devices`,
the default, and the loss then multiplied by the number of processes). If the model's `forward` has
a `**kwargs` parameter, or the model sets `accepts_loss_kwargs` (which replaces that signature
check), the count is passed in and the loss used AS IS — the model must divide by it; a
`num_items_in_batch` parameter without `**kwargs` is never passed the count. A `compute_loss_func`
is always handed it, and its loss used as is. Otherwise the loss is divided by `current_gradient_accumulation_steps`, the number of
batches the window really holds. Accelerate's own ÷ k is switched off (`num_steps=1`). It clips the
summed gradient once per window to `max_grad_norm` (default 1.0), logs the pre-clip norm as
`grad_norm`, and logs as `loss` the sum over the window of what it called backward on.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from .. import _validate
from .._validate import one_of
from .problem import Problem
from .quiet import quiet_loggers

MODES = ("mean", "num_items", "num_items_named", "kwargs_ignored")


class MeanLossModel(nn.Module):
    """forward(x, labels) → {"loss": micro-batch mean}: what most custom models return."""

    def __init__(self, net: nn.Module, problem: Problem):
        super().__init__()
        self.net, self.problem = net, problem

    def forward(self, x, labels):
        return {"loss": self.problem.mean_loss(self.net(x), labels)}

    def zero_grad(self, set_to_none: bool = True) -> None:
        # the Trainer calls model.zero_grad(): route it through the inner net, where it is recorded
        self.net.zero_grad(set_to_none=set_to_none)


class NumItemsModel(MeanLossModel):
    """Takes **kwargs, so the Trainer passes `num_items_in_batch` — and uses it: sum ÷ window items."""

    def forward(self, x, labels, num_items_in_batch=None, **kwargs):
        pred = self.net(x)
        if num_items_in_batch is None:  # evaluation, or a Trainer that counts nothing
            return {"loss": self.problem.mean_loss(pred, labels)}
        return {"loss": self.problem.sum_loss(pred, labels) / num_items_in_batch}


class NamedOnlyModel(MeanLossModel):
    """Names `num_items_in_batch` but has no **kwargs: the Trainer's check (`trainer.py`, a
    VAR_KEYWORD parameter or `accepts_loss_kwargs`) says no, so the count is never passed and the
    loss is divided by the window's micro-batches, as for the mean loss."""

    def forward(self, x, labels, num_items_in_batch=None):
        pred = self.net(x)
        if num_items_in_batch is None:
            return {"loss": self.problem.mean_loss(pred, labels)}
        return {"loss": self.problem.sum_loss(pred, labels) / num_items_in_batch}


class KwargsIgnoredModel(MeanLossModel):
    """Takes **kwargs but ignores `num_items_in_batch` (transformers issue #47688): the Trainer
    then divides by nothing at all."""

    def forward(self, x, labels, **kwargs):
        return {"loss": self.problem.mean_loss(self.net(x), labels)}


class LogitsModel(MeanLossModel):
    """forward(x) → a transformers `ModelOutput` holding `logits` (read as `outputs.logits` or
    `outputs["logits"]`, as from a Hugging Face model): the loss is left to a `compute_loss_func`."""

    def forward(self, x, labels=None):
        from transformers.modeling_outputs import TokenClassifierOutput

        return TokenClassifierOutput(logits=self.net(x))


MODELS = {
    "mean": MeanLossModel,
    "num_items": NumItemsModel,
    "num_items_named": NamedOnlyModel,
    "kwargs_ignored": KwargsIgnoredModel,
}


def trainer_loop(
    problem: Problem,
    model,
    optimizer,
    scheduler,
    folder: str,
    *,
    mode: str = "mean",
    max_grad_norm: float | None = 0.0,
    compute_loss_func: Callable | None = None,
) -> dict:
    """One epoch of the real Trainer. `max_grad_norm=0.0` turns clipping off so gradients can be
    compared with the unclipped reference; None keeps the Trainer's default."""
    _validate.instance(
        "problem", problem, Problem, "a Problem al.frameworks.make_problem() returns"
    )
    one_of("mode", mode, MODELS)
    if max_grad_norm is not None:
        max_grad_norm = _validate.positive_float("max_grad_norm", max_grad_norm, allow_zero=True)
    if compute_loss_func is not None:
        _validate.function("compute_loss_func", compute_loss_func)
    from transformers import Trainer, TrainerCallback, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    class KeepLogs(TrainerCallback):
        def __init__(self):
            self.rows: list[dict] = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:  # per-step rows; the closing summary has "train_loss"
                self.rows.append(dict(logs))

    wrapped = LogitsModel(model, problem) if compute_loss_func else MODELS[mode](model, problem)
    data = problem.data
    dataset = [{"x": data.x[i], "labels": data.y[i]} for i in range(len(data))]
    options = {} if max_grad_norm is None else {"max_grad_norm": max_grad_norm}
    args = TrainingArguments(
        output_dir=folder,  # a temporary folder; save_strategy="no" writes no checkpoint into it
        per_device_train_batch_size=problem.micro_batch_size,
        gradient_accumulation_steps=problem.k,
        num_train_epochs=1,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        use_cpu=True,
        train_sampling_strategy="sequential",  # the reference's order, not a shuffled one
        **options,
    )
    keep = KeepLogs()
    with quiet_loggers("transformers", "accelerate"):
        trainer = Trainer(
            model=wrapped,
            args=args,
            train_dataset=dataset,
            optimizers=(optimizer, scheduler),
            callbacks=[keep],
            compute_loss_func=compute_loss_func,
        )
        trainer.remove_callback(PrinterCallback)  # it prints every log row into the notebook
        trainer.train()
    return {
        "loss": [float(r["loss"]) for r in keep.rows],
        "grad_norm": [float(r["grad_norm"]) for r in keep.rows if "grad_norm" in r],
    }


def default_max_grad_norm() -> float:
    """`TrainingArguments`' default clipping threshold, read from the installed package."""
    return float(trainer_defaults()["max_grad_norm"])


def trainer_defaults() -> dict:
    """The `TrainingArguments` defaults lesson 11 states, read from the installed package:
    `max_grad_norm`, `logging_steps`, `average_tokens_across_devices`."""
    from transformers import TrainingArguments

    names = ("max_grad_norm", "logging_steps", "average_tokens_across_devices")
    return {name: getattr(TrainingArguments, name) for name in names}
