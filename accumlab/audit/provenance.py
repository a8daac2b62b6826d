"""Where a step's gradient came from (lesson 08's exercises): from the model's own backward passes,
one micro-batch at a time, or from somewhere else.

The gradient matches compare what a step saw with the reference; they cannot tell a gradient that
was accumulated from one computed elsewhere (on a copy of the model, in another thread) and
written into `.grad`, behind backward passes that add nothing. The parameter hooks record what
every backward pass added (`BackwardRecord`), so two things can be checked:

- each backward pass that went through one micro-batch's forward added a positive multiple of that
  micro-batch's own gradient (its loss may be divided by anything: k, its items, the window's;
  under a GradScaler it is also multiplied by the scale);
- the `.grad` a step saw is what the backward passes added since `.grad` was last emptied (by
  `zero_grad` or `p.grad = None`; at most back to the previous step), times one positive factor
  (the scaler's unscale, clipping, a division the loop does itself) of at most MAX_FACTOR, after
  the scale is taken out: a larger one means the loop added next to nothing and wrote the
  gradient in.

Not checked where it cannot be recomputed: a model with active dropout (its masks are drawn
again), windows with inputs the audit does not know, and non-finite passes.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ..reference import full_batch_grads
from .hypotheses import vec
from .recording import BackwardRecord, Recording
from .spec import Setup

MAX_FACTOR = (
    100.0  # .grad / what backward added: clipping and division shrink it, never this much up
)


def _multiple(got: torch.Tensor, of: torch.Tensor, rel: float) -> float | None:
    """c > 0 with got = c · of to `rel` of the largest entry, else None (0 when both are 0)."""
    if not bool(of.any()):
        return 0.0 if not bool(got.any()) else None
    c = float(got @ of / (of @ of))
    if c > 0 and bool((got - c * of).abs().max() <= rel * (c * of).abs().max()):
        return c
    return None


def _dropout_active(model: nn.Module) -> bool:
    return any(
        isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 and m.training
        for m in model.modules()
    )


def _added(b: BackwardRecord, names: list[str], like: dict) -> torch.Tensor:
    return torch.cat(
        [b.added.get(n, torch.zeros_like(like[n], dtype=torch.float64)).reshape(-1) for n in names]
    )


def foreign_gradient(rec: Recording, setup: Setup) -> str:
    """A sentence on the first step whose gradient did not come from the model's own backward
    passes, or "" when every checked one did."""
    if _dropout_active(setup.model):
        return ""
    names = [n for n, _ in setup.model.named_parameters()]
    rel = max(1e-8, 100 * setup.rtol)  # float32: 1e-3 of the largest entry; float64: 1e-7
    probe = copy.deepcopy(setup.model)
    for step in rec.steps:
        if step.skipped or not step.window or None in step.window:
            continue
        passes = [b for b in rec.backwards if b.step == step.index]
        if not all(b.finite for b in passes):
            continue
        with torch.no_grad():
            for n, p in probe.named_parameters():
                p.copy_(step.params[n])
        own = {}
        total = torch.zeros(sum(step.grads[n].numel() for n in names), dtype=torch.float64)
        wrote = False  # a pass since the last restart wrote into .grad
        for b in passes:
            added = _added(b, names, step.grads)
            if b.fresh and wrote:  # .grad was emptied since (zero_grad, `p.grad = None`): restart
                total, wrote = torch.zeros_like(total), False
            total += added
            wrote |= b.accumulated
            batches = {rec.forwards[f] for f in b.forwards}
            if len(batches) != 1 or None in batches:
                continue  # no forward, or several at once: other findings say what happened
            (mb,) = batches
            if mb not in own:
                own[mb] = vec(full_batch_grads(probe, setup.batch(mb), loss=setup.loss), names)
            if _multiple(added, own[mb], rel) is None:
                return (
                    f"at step {step.index + 1}, a backward pass through micro-batch {mb}'s forward "
                    "added something other than a multiple of that micro-batch's own gradient "
                    "(nothing at all, or another batch's gradient)"
                )
        seen = vec(step.grads, names)
        if not torch.isfinite(seen).all():
            continue
        factor = _multiple(seen, total, rel)
        scale = step.scale or 1.0  # under a GradScaler the passes added scale × the gradient
        if factor is None or factor * scale > MAX_FACTOR:
            return (
                f"at step {step.index + 1}, .grad held something other than what the window's "
                "backward passes added to the model's own parameters (written into .grad from a "
                "copy of the model, or from another computation)"
            )
    return ""
