"""One window with one overflowing micro-batch, stepped with scaler.step(optimizer) or with
optimizer.step(): what GradScaler's inf/NaN check is for (lesson 08)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .._validate import flag
from ..data import regression_data
from ..models import mlp

K = 4
OUTLIER = 1000.0  # one micro-batch's targets this many times too large


@dataclass(frozen=True)
class Overflow:
    """What one window did to the weights: `finite` (every weight still finite), `nan` (some
    weight NaN), `moved` (some weight changed), and the GradScaler's scale before and after."""

    finite: bool
    nan: bool
    moved: bool
    scale_before: float
    scale_after: float


def overflow_window(scaler_step: bool, outlier: bool = True) -> Overflow:
    """Four micro-batches of 4 in float16 autocast on the CPU, a GradScaler at 2**10; with
    `outlier`, micro-batch 1's targets are 1000 times too large, so its scaled gradient overflows
    float16 in backward (without, nothing overflows: the window a step must not skip). Each
    loss / k is scaled and backpropagated, then unscale_, clip to 0.5, the step (`scaler_step`:
    scaler.step(optimizer), else optimizer.step()), update(). Lesson 08."""
    flag("scaler_step", scaler_step)
    flag("outlier", outlier)
    model = mlp(features=4, hidden=8, depth=1, seed=0, dtype=torch.float32)
    before = copy.deepcopy(model)
    data = regression_data(n=16, features=4, seed=0).to(torch.float32)
    batches = [(mb.x, mb.y) for mb in data.micro_batches(4)]
    if outlier:
        batches[1] = (batches[1][0], batches[1][1] * OUTLIER)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    start = float(scaler.get_scale())
    for x, y in batches:
        with torch.autocast("cpu", dtype=torch.float16):
            prediction = model(x)
        scaler.scale(F.mse_loss(prediction.float(), y) / K).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    if scaler_step:
        scaler.step(optimizer)  # checks for inf/NaN first, and skips the step if it finds one
    else:
        optimizer.step()
    scaler.update()
    params = list(model.parameters())
    return Overflow(
        finite=all(bool(torch.isfinite(p).all()) for p in params),
        nan=any(bool(torch.isnan(p).any()) for p in params),
        moved=any(not torch.equal(p, q) for p, q in zip(before.parameters(), params, strict=True)),
        scale_before=start,
        scale_after=float(scaler.get_scale()),
    )
