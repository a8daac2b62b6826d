"""What each known bug would have given the optimizer, at the parameters a window ran at (lesson 08).

Every prediction is built from the same measured pieces: each micro-batch's own mean-loss gradient
M_b and its item count c_b, recomputed with `al.full_batch_grads` at the loop's parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..reference import full_batch_grads
from .runner import StepRecord
from .spec import Setup


def vec(grads: dict[str, torch.Tensor], names: list[str]) -> torch.Tensor:
    return torch.cat([grads[n].detach().reshape(-1).double().cpu() for n in names])


def clip(v: torch.Tensor, max_norm: float | None) -> torch.Tensor:
    if max_norm is None:
        return v
    # the same coefficient torch.nn.utils.clip_grad_norm_ applies (its 1e-6 included)
    return v * min(1.0, max_norm / (float(v.norm()) + 1e-6))


def close(a: torch.Tensor, b: torch.Tensor, scale: float, rtol: float) -> bool:
    return float((a - b).norm()) <= rtol * max(scale, 1e-300)


def ratio(a: torch.Tensor, b: torch.Tensor) -> float:
    nb = float(b.norm())
    return float(a.norm()) / nb if nb else math.inf


@dataclass
class Window:
    """Per-micro-batch mean gradients M_b and item counts c_b at the parameters the window ran at."""

    means: list[torch.Tensor]
    counts: list[int]

    @property
    def terms(self) -> list[torch.Tensor]:
        total = sum(self.counts)
        return [
            c * m / total for m, c in zip(self.means, self.counts, strict=True)
        ]  # each item weighs 1/N

    @property
    def reference(self) -> torch.Tensor:
        return sum(self.terms)


def window_grads(probe: nn.Module, step: StepRecord, setup: Setup, names: list[str]) -> Window:
    with torch.no_grad():
        for n, p in probe.named_parameters():
            p.copy_(step.params[n])
    means = [
        vec(full_batch_grads(probe, setup.batches[b], loss=setup.loss), names) for b in step.window
    ]
    counts = [setup.loss.count(setup.batches[b].y) for b in step.window]
    return Window(means, counts)


def hypotheses(step: StepRecord, w: Window, setup: Setup, previous: torch.Tensor | None):
    """(code, predicted gradient) for each known bug that could apply to this window, in the order
    they are tried. Each prediction is what that bug computes at the same parameters."""
    c, n, k = setup.max_norm, len(w.means), setup.k
    terms = w.terms
    mean_terms = [m / n for m in w.means]  # loss / window_len with each micro-batch's own mean
    if n > 1:
        yield "LOSS_NOT_DIVIDED", clip(sum(w.means), c)
    if previous is not None:
        yield "GRADS_NEVER_ZEROED", clip(previous + w.reference, c)
    for start in range(1, n):
        yield "ZERO_GRAD_IN_WINDOW", clip(sum(terms[start:]), c)
        yield "ZERO_GRAD_IN_WINDOW", clip(sum(mean_terms[start:]), c)
    yield "MEAN_OF_MEANS", clip(sum(mean_terms), c)
    if n < k:
        yield "LAST_WINDOW_UNDERWEIGHTED", clip(w.reference * n / k, c)
        yield "LAST_WINDOW_UNDERWEIGHTED", clip(sum(w.means) / k, c)
    if c is not None:
        for parts in (terms, mean_terms):
            running = torch.zeros_like(w.reference)
            for t in parts:  # clip_grad_norm_ after each backward clips the running sum in .grad
                running = clip(running + t, c)
            yield "CLIP_PER_MICRO_BATCH", running
        yield "NOT_CLIPPED", w.reference
        if step.scale is not None:  # clipping before unscale_: the threshold meets scaled gradients
            yield "UNSCALE_MISUSE", clip(w.reference * step.scale, c) / step.scale
