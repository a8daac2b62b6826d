"""State updated on every forward: an exponential moving average (EMA) of the weights updated per
micro-step instead of per optimizer step decays k times per step (lesson 09)."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import (
    MAX_STEPS,
    finite_float,
    flag,
    fraction,
    one_of,
    positive_float,
    positive_int,
)
from ..compare import flatten
from ..data import Data
from ..engine import params_of
from ._checks import require_data, require_model

# where the loop calls ema.update(): after the optimizer step (once per window), or after every
# micro-batch (the F5-TTS bug: the EMA advances k times per optimizer step)
EMA_PLACEMENTS = ("optimizer_step", "micro_step")


@one_thread()
def ema_run(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    beta: float = 0.9,
    placement: str = "optimizer_step",
    lr: float = 0.05,
    ema_start: float | None = None,
) -> dict:
    """Train a copy of `model` with SGD on the MSE of `data` (windows of k micro-batches, each
    loss ÷ k) and keep an EMA of its weights: ema ← β·ema + (1 − β)·weights at `placement`.

    `ema_start` fills the EMA with that constant instead of the initial weights (to read how much
    of the old EMA survives a step). Returns {"ema", "params"}: flat tensors after every optimizer
    step, and {"updates"}: EMA updates per optimizer step, counted inside the update. Lesson 09.
    """
    require_model(model)
    require_data(data)
    accumulation_steps = positive_int("accumulation_steps", accumulation_steps)
    one_of("placement", placement, EMA_PLACEMENTS)
    beta = fraction("beta", beta)
    lr = positive_float("lr", lr)
    if ema_start is not None:
        ema_start = positive_float("ema_start", ema_start, allow_zero=True)
    micro = data.micro_batches(micro_batch_size)
    windows = [micro[i : i + accumulation_steps] for i in range(0, len(micro), accumulation_steps)]
    if len(windows[-1]) < accumulation_steps or len(micro[-1]) < micro_batch_size:
        raise ValueError(
            f"len(data)={len(data)} must be a multiple of micro_batch_size × accumulation_steps "
            f"= {micro_batch_size} × {accumulation_steps} = {micro_batch_size * accumulation_steps}"
        )
    # one training run, this placement's EMA (ema_runs checks the same arguments)
    return ema_runs(
        model,
        data,
        micro_batch_size,
        accumulation_steps,
        beta=beta,
        placements=(placement,),
        lr=lr,
        ema_start=ema_start,
    )[placement]


@one_thread()
def ema_runs(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    beta: float = 0.9,
    placements=EMA_PLACEMENTS,
    lr: float = 0.05,
    ema_start: float | None = None,
) -> dict:
    """`ema_run` for several placements at once: {placement: its result}. Training does not read
    the EMA, so one training run serves every placement's EMA. Lesson 09."""
    require_model(model)
    require_data(data)
    positive_int("accumulation_steps", accumulation_steps)
    placements = _validate.sequence("placements", placements)
    for i, placement in enumerate(placements):
        one_of(f"placements[{i}]", placement, EMA_PLACEMENTS)
    if not (isinstance(beta, (int, float)) and not isinstance(beta, bool) and 0 <= beta < 1):
        raise ValueError(f"beta must be a number in [0, 1), got {beta!r}")
    positive_float("lr", lr)
    if ema_start is not None:
        positive_float("ema_start", ema_start, allow_zero=True)
    micro = data.micro_batches(micro_batch_size)
    windows = [micro[i : i + accumulation_steps] for i in range(0, len(micro), accumulation_steps)]
    if len(windows[-1]) < accumulation_steps or len(micro[-1]) < micro_batch_size:
        raise ValueError(
            f"len(data)={len(data)} must be a multiple of micro_batch_size × accumulation_steps "
            f"= {micro_batch_size} × {accumulation_steps} = {micro_batch_size * accumulation_steps}"
        )
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    params = list(model.parameters())

    def start():
        return [
            p.detach().clone() if ema_start is None else torch.full_like(p, ema_start)
            for p in params
        ]

    emas = {placement: start() for placement in placements}
    made = dict.fromkeys(placements, 0)  # EMA updates so far, counted by the update itself

    def update(placement):
        made[placement] += 1
        with torch.no_grad():
            for e, p in zip(emas[placement], params, strict=True):
                e.mul_(beta).add_(p, alpha=1 - beta)

    names = [n for n, _ in model.named_parameters()]
    out = {placement: {"ema": [], "params": [], "updates": []} for placement in placements}
    for window in windows:
        opt.zero_grad(set_to_none=True)
        before = dict(made)
        for i, mb in enumerate(window):
            loss = torch.nn.functional.mse_loss(model(mb.x), mb.y)
            (loss / accumulation_steps).backward()
            if "micro_step" in emas and i < len(window) - 1:
                update("micro_step")  # the weights have not moved: it pulls toward them again
        opt.step()
        weights = flatten(params_of(model))
        for placement, ema in emas.items():
            update(placement)
            out[placement]["updates"].append(made[placement] - before[placement])
            out[placement]["ema"].append(flatten(dict(zip(names, ema, strict=True))))
            out[placement]["params"].append(weights)
    return out


@one_thread()
def ema_old_weight(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    beta: float = 0.9,
    placement: str = "optimizer_step",
) -> float:
    """How much of the previous EMA survives one optimizer step, measured: run the same step with
    the EMA started at 0 and at 1; the difference is the old value's weight (β per step when the
    EMA updates once per step, β^k when it updates every micro-step). Lesson 09."""
    window = require_data(data).first_window(micro_batch_size, accumulation_steps)
    runs = [
        ema_run(
            model,
            window,
            micro_batch_size,
            accumulation_steps,
            beta=beta,
            placement=placement,
            ema_start=s,
        )
        for s in (0.0, 1.0)
    ]
    weights = runs[1]["ema"][0] - runs[0]["ema"][0]
    if (weights - weights[0]).abs().max() > 1e-12:  # every entry must keep the same share
        raise RuntimeError("EMA entries kept different shares of their old value")
    return float(weights[0])


def ema_horizon(old_weight: float) -> float:
    """Optimizer steps an EMA effectively averages over: 1 / (1 − weight kept per step)."""
    if not 0 <= finite_float("old_weight", old_weight) < 1:
        raise ValueError(f"old_weight must be in [0, 1), got {old_weight!r}")
    return 1 / (1 - old_weight)


def _ema_model(model: nn.Module, beta: float):
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    # the EMA PyTorch ships: its first update_parameters() copies the weights, later ones
    # lerp toward them with weight 1 − β; n_averaged counts the calls
    return AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(beta))


def _flat(module: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def accelerate_ema_updates(
    accumulation_steps: int, micro_steps: int, *, gated: bool, beta: float = 0.9
) -> dict:
    """The F5-TTS loop with the real Accelerate library and a real EMA
    (`torch.optim.swa_utils.AveragedModel` with `get_ema_multi_avg_fn(beta)`): every iteration
    runs inside `accelerator.accumulate(model)` and calls `optimizer.step()` (Accelerate skips it
    until the gradients sync); the EMA's `update_parameters(model)` runs every iteration, or
    (`gated`) only when `accelerator.sync_gradients` is True.

    The reference is a plain PyTorch loop over the same micro-batches (each loss ÷ k, one SGD step
    per window) whose EMA is updated once, after each optimizer step. Returns {"sync_flags": the
    flag after each iteration, "optimizer_steps": steps the optimizer really took, "ema_updates":
    the EMA's n_averaged, "ema_gap": ‖EMA − reference EMA‖ / ‖reference EMA‖ at the end}.
    Lesson 09."""
    accumulation_steps = positive_int("accumulation_steps", accumulation_steps)
    micro_steps = positive_int(
        "micro_steps", micro_steps, maximum=MAX_STEPS, why="each runs a real step"
    )
    flag("gated", gated)
    beta = fraction("beta", beta)
    from accelerate import Accelerator  # here: importing Accelerate takes seconds

    from ..data import regression_data
    from ..models import mlp

    data = regression_data(4 * micro_steps, 4, seed=0)
    micro = data.micro_batches(4)

    # the reference: accumulate k micro-batches, step, update the EMA once
    ref_model = mlp(4, 8, 1, seed=0)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.05)
    ref_ema = _ema_model(ref_model, beta)
    for i, mb in enumerate(micro):
        (torch.nn.functional.mse_loss(ref_model(mb.x), mb.y) / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0:
            ref_opt.step()
            ref_opt.zero_grad()
            ref_ema.update_parameters(ref_model)

    accelerator = Accelerator(gradient_accumulation_steps=accumulation_steps, cpu=True)
    accelerator.sync_gradients = True  # the flag is process-wide: start as a new process would
    model = mlp(4, 8, 1, seed=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = []
    optimizer.register_step_post_hook(lambda *_: steps.append(1))  # counts real steps only
    model, optimizer = accelerator.prepare(model, optimizer)
    ema = _ema_model(model, beta)
    flags = []
    for mb in micro:
        with accelerator.accumulate(model):
            accelerator.backward(torch.nn.functional.mse_loss(model(mb.x), mb.y))
            optimizer.step()
            optimizer.zero_grad()
        flags.append(accelerator.sync_gradients)
        if accelerator.sync_gradients or not gated:
            ema.update_parameters(model)
    reference = _flat(ref_ema.module)
    return {
        "sync_flags": flags,
        "optimizer_steps": len(steps),
        "ema_updates": int(ema.n_averaged),
        "ema_gap": float((_flat(ema.module) - reference).norm() / reference.norm()),
    }
