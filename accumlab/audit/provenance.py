"""Where a step's gradient came from (lesson 08's exercises): from the model's own backward passes,
one micro-batch at a time, or from somewhere else.

The gradient matches compare what a step saw with the reference; they cannot tell a gradient that
was accumulated from one computed elsewhere (on a copy of the model, in another thread) and
written into `.grad`, behind backward passes that add nothing. The parameter hooks record what
every backward pass (and `torch.autograd.grad` call) added (`BackwardRecord`), so two things can
be checked:

- the passes that went through one micro-batch's forward (one, or one per sample) added, together,
  a positive multiple of that micro-batch's own gradient, and none added nothing (its loss may
  be divided by anything: k, its items, the window's;
  under a GradScaler it is also multiplied by the scale);
- the `.grad` a step saw is a combination Σ c_i a_i of what the window's passes a_i added, every
  c_i ≥ 0 (0 for a pass whose gradient was zeroed away, a dropped tail) and, the scaler's scale
  taken out, at most k / the window's micro-batches (1 for a full window): a loop may divide,
  clip, weight its micro-batches, or rescale a short window by k / its length, but a weight
  beyond that means the passes added a fraction of a gradient that came from elsewhere.

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

FIT = 1e-8  # the combination reproduces .grad to this share of its largest entry, at least


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


def _weights(seen: torch.Tensor, added: list[torch.Tensor], rel: float) -> list[float] | None:
    """c ≥ 0 with seen = Σ c_i added_i (least squares, to `rel` of the largest entry), or None.
    A pass that added nothing gets weight 0."""
    if not added:
        return [] if not bool(seen.any()) else None
    a = torch.stack(added, dim=1)  # (parameters, passes)
    c = torch.linalg.lstsq(a, seen.unsqueeze(1), driver="gelsd").solution.squeeze(1)
    fit = a @ c
    top = float(seen.abs().max()) or 1.0
    if float((fit - seen).abs().max()) > max(rel, FIT) * top:
        return None
    big = float(c.abs().max()) or 1.0
    if float(c.min()) < -1e-6 * big:
        return None  # a pass counted negatively: not accumulation
    return [max(float(v), 0.0) for v in c]


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
        own, grouped = {}, {}
        for b in passes:
            batches = {rec.forwards[f] for f in b.forwards}
            if len(batches) != 1 or None in batches:
                continue  # no forward, or several at once: other findings say what happened
            (mb,) = batches
            added = _added(b, names, step.grads)
            if not bool(added.any()):
                return (
                    f"at step {step.index + 1}, a backward pass through micro-batch {mb}'s forward "
                    "added nothing to .grad (a decoy?)"
                )
            # a micro-batch's passes together (one per sample, say) add its own gradient
            grouped[mb] = grouped[mb] + added if mb in grouped else added
        for mb, added in grouped.items():
            own[mb] = vec(full_batch_grads(probe, setup.batch(mb), loss=setup.loss), names)
            if _multiple(added, own[mb], rel) is None:
                return (
                    f"at step {step.index + 1}, the backward passes through micro-batch {mb}'s "
                    "forward added something other than a multiple of that micro-batch's own "
                    "gradient (another batch's gradient, or one computed elsewhere)"
                )
        seen = vec(step.grads, names)
        if not torch.isfinite(seen).all():
            continue
        weights = _weights(seen, [_added(b, names, step.grads) for b in passes], rel)
        scale = step.scale or 1.0  # under a GradScaler the passes added scale × the gradient
        if weights is None:
            return (
                f"at step {step.index + 1}, .grad held something other than a combination of what "
                "the window's backward passes added to the model's own parameters (written into "
                ".grad from a copy of the model, or from another computation)"
            )
        heaviest = max(weights, default=0.0) * scale
        # a full window's passes carry their whole share: clipping and division only shrink it;
        # a short window may be rescaled by k / its length (a loss divided by k throughout). Its
        # length: the micro-batches whose passes count (a tail zeroed away before them does not)
        used = {
            rec.forwards[f]
            for b, w in zip(passes, weights, strict=True)
            if w > 1e-9 * max(weights)
            for f in b.forwards
        }
        bound = setup.k / max(1, min(len(step.window), len(used) or len(step.window)))
        if heaviest > bound * (1 + 1e-6):
            return (
                f"at step {step.index + 1}, .grad weighed a backward pass's contribution "
                f"{heaviest:.3g} times (more than k / the window's micro-batches = {bound:.3g}): "
                "the passes carried a fraction of a gradient that "
                "came from elsewhere (a copy of the model, another computation); let each "
                "backward put its full share into .grad"
            )
    return ""
