"""The optimizer fused into backward (PyTorch's `Tensor.register_post_accumulate_grad_hook`
recipe): the hook steps the optimizer after EVERY backward, so k micro-batches make k updates
per window instead of one (lesson 09)."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import one_of, positive_float
from ..data import Data
from ..engine import Recipe, params_of, run
from ..optim import make_optimizer
from ._checks import require_data, require_model

# every: the tutorial's hook, stepping after each backward; last: the same hook, allowed to step
# only during the window's last backward (earlier micro-batches just accumulate into .grad)
HOOK_GATES = ("every", "last")


@one_thread()
def fused_optimizer_window(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    optimizer: str = "adam",
    lr: float = 0.01,
    gate: str = "every",
) -> dict:
    """One window of `data` in micro-batches (MSE, each loss ÷ k) on a copy of `model`, with one
    optimizer per parameter stepped and zeroed inside its post-accumulate-grad hook, as in the
    PyTorch tutorial "How to save memory by fusing the optimizer step into the backward pass".

    Returns {"params": weights after the window, "hook_calls", "steps": optimizer steps per
    parameter tensor, "state_steps": Adam's own step counter per tensor (None for SGD)}. Lesson 09.
    """
    one_of("gate", gate, HOOK_GATES)
    require_model(model)
    require_data(data)
    lr = positive_float("lr", lr)  # checked here: torch would say "Invalid learning rate"
    micro = data.micro_batches(micro_batch_size)
    model = copy.deepcopy(model)
    optimizers = {p: make_optimizer(optimizer, [p], lr) for p in model.parameters()}
    steps = {p: 0 for p in optimizers}
    state = {"hook_calls": 0, "may_step": gate == "every"}

    def hook(p: torch.Tensor) -> None:  # runs once .grad of p holds this backward's contribution
        state["hook_calls"] += 1
        if state["may_step"]:
            optimizers[p].step()
            optimizers[p].zero_grad()  # the memory saving: the gradient is dropped right away
            steps[p] += 1

    handles = [p.register_post_accumulate_grad_hook(hook) for p in optimizers]
    try:
        for i, mb in enumerate(micro):
            state["may_step"] = gate == "every" or i == len(micro) - 1
            loss = torch.nn.functional.mse_loss(model(mb.x), mb.y)
            (loss / len(micro)).backward()
    finally:
        for h in handles:
            h.remove()
    names = {p: n for n, p in model.named_parameters()}
    return {
        "params": params_of(model),
        "hook_calls": state["hook_calls"],
        "steps": {names[p]: s for p, s in steps.items()},
        "state_steps": {
            names[p]: int(o.state[p]["step"]) if "step" in o.state.get(p, {}) else None
            for p, o in optimizers.items()
        },
    }


@one_thread()
def accumulate_then_step(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    optimizer: str = "adam",
    lr: float = 0.01,
) -> dict[str, torch.Tensor]:
    """The reference: the same window accumulated by `al.run` (mean per micro-batch ÷ k) and ONE
    optimizer step. Returns the weights after it. Lesson 09."""
    lr = positive_float("lr", lr)
    k = len(require_data(data).micro_batches(micro_batch_size))
    trace = run(Recipe(micro_batch_size, k), model, data, optimizer=optimizer, lr=lr)
    return trace.params[0]


def update_length(after: dict[str, torch.Tensor], before: dict[str, torch.Tensor]) -> float:
    """‖after − before‖ over all parameters: how far one window moved the weights. Lesson 09."""
    _validate.tensor_dict("after", after)
    _validate.tensor_dict("before", before)
    if set(after) != set(before):
        raise ValueError(
            f"after and before must name the same parameters, got {sorted(after)} and "
            f"{sorted(before)}"
        )
    for n in after:
        if after[n].shape != before[n].shape:
            raise ValueError(
                f"after[{n!r}] and before[{n!r}] must have the same shape, got "
                f"{tuple(after[n].shape)} and {tuple(before[n].shape)}"
            )
    return float(torch.cat([(after[n] - before[n]).reshape(-1) for n in sorted(after)]).norm())
