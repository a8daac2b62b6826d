"""Training with a learnable temperature: open_clip's loop gives `logit_scale` k times the big
batch's gradient, and dividing each of its losses by k gives every encoder weight 1/k of it. A
constant factor on a gradient is what Adam-type optimizers divide out (up to their ε), while an
SGD step grows with it: this measures both over a few optimizer steps (lesson 09)."""

from __future__ import annotations

import copy

import torch

from .. import _validate
from .._threads import one_thread
from .._validate import positive_float, positive_int
from ..compare import grad_diff
from ..data import Data
from ..engine import params_of
from ..optim import make_optimizer
from ._checks import require_data, require_model
from .contrastive import LOGIT_SCALE, logit_scale_of
from .gradcache import cached_negatives_grads, gradcache_grads

# gradcache: the big batch's gradient; open_clip: its loop as is (logit_scale × k);
# open_clip_divided: each of its losses ÷ k (logit_scale right, every encoder weight ÷ k)
TEMPERATURE_LOOPS = ("gradcache", "open_clip", "open_clip_divided")
MAX_TRAINING_STEPS = 200  # a few steps show it; more only makes the lesson wait


def _gradient(loop: str, model, data: Data, micro_batch_size: int) -> dict:
    if loop == "gradcache":
        return gradcache_grads(model, data, micro_batch_size)["grads"]
    divide = loop == "open_clip_divided"
    return cached_negatives_grads(model, data, micro_batch_size, divide_loss=divide)["grads"]


@one_thread()
def temperature_training(
    model,
    data: Data,
    micro_batch_size: int,
    *,
    optimizer: str = "adamw",
    steps: int = 5,
    lr: float = 0.01,
    max_norm: float | None = None,
) -> dict:
    """Train a copy of `model` (an encoder with a learnable `logit_scale`:
    `encoder(learnable_temperature=True)`) for `steps` optimizer steps on `data`, once per loop of
    TEMPERATURE_LOOPS, each step's gradient from that loop with micro-batches of `micro_batch_size`.
    `max_norm`: clip the gradient's total norm over every parameter before each step, as
    open_clip's `--grad-clip-norm` does (the norm then holds `logit_scale`'s factor).

    Returns {"updates": {loop: {name: final − initial parameters}}, "gaps": {loop: relative L2
    gap of its update to GradCache's}} (the open_clip loops). Lesson 09."""
    require_model(model)
    require_data(data)
    if logit_scale_of(model) is None:
        raise ValueError(
            f"model must have a learnable {LOGIT_SCALE!r} (al.coupling.encoder("
            "learnable_temperature=True)): without one, open_clip's loop is exact"
        )
    steps = positive_int("steps", steps)
    if steps > MAX_TRAINING_STEPS:
        raise ValueError(f"steps must be at most {MAX_TRAINING_STEPS}, got {steps}")
    lr = positive_float("lr", lr)
    if max_norm is not None:
        max_norm = positive_float("max_norm", max_norm)
    _validate.one_of("optimizer", optimizer, ("sgd", "sgd_momentum", "adam", "adamw"))
    data.micro_batches(micro_batch_size)  # validates micro_batch_size before any step
    start = params_of(model)
    updates = {}
    for loop in TEMPERATURE_LOOPS:
        trained = copy.deepcopy(model)
        opt = make_optimizer(optimizer, trained.parameters(), lr)
        for _ in range(steps):
            grads = _gradient(loop, trained, data, micro_batch_size)
            for name, p in trained.named_parameters():
                p.grad = grads[name].clone()
            if max_norm is not None:
                torch.nn.utils.clip_grad_norm_(trained.parameters(), max_norm)
            opt.step()
            opt.zero_grad(set_to_none=True)
        end = params_of(trained)
        updates[loop] = {n: end[n] - start[n] for n in start}
    exact = updates["gradcache"]
    gaps = {loop: grad_diff(updates[loop], exact).rel_l2 for loop in TEMPERATURE_LOOPS[1:]}
    return {"updates": updates, "gaps": gaps}
