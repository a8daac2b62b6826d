"""What the optimizer would have seen under each combination of known bugs, at the parameters a
window ran at (lesson 08).

Bugs compose: a loop can zero inside the window AND forget to divide, or clip on partial sums of an
under-weighted window. So a prediction is a product of four independent choices, each either the
reference's or a known bug's:

- zeroing: every micro-batch kept / an earlier window's gradient carried along / only the last
  micro-batches kept (for a window that began in an earlier epoch: the part before the epoch's
  start zeroed) / everything zeroed before the step;
- weights: what each micro-batch's mean gradient M_b is multiplied by (its share of the window's
  items, 1/n, 1/k, 1, its item count, or a division by n or k done twice);
- the GradScaler: the scale each micro-batch was multiplied by and the unscale_ calls that divided
  .grad, replayed from the recorded calls;
- clipping: once per window, never, after every backward, or before unscale_.

Every piece is measured: M_b and the item counts are recomputed with `al.full_batch_grads` at the
loop's own parameters. Each combination names the set of codes it stands for.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from ..reference import full_batch_grads
from .recording import StepRecord
from .spec import Setup


def vec(grads: dict[str, torch.Tensor], names: list[str]) -> torch.Tensor:
    return torch.cat([grads[n].detach().reshape(-1).double().cpu() for n in names])


def clip(v: torch.Tensor, max_norm: float | None) -> torch.Tensor:
    if max_norm is None:
        return v
    # the same coefficient torch.nn.utils.clip_grad_norm_ applies (its 1e-6 included)
    return v * min(1.0, max_norm / (float(v.norm()) + 1e-6))


def ratio(a: torch.Tensor, b: torch.Tensor) -> float:
    nb = float(b.norm())
    return float(a.norm()) / nb if nb else math.inf


@dataclass
class Window:
    """Per-micro-batch mean gradients M_b (rows of `means`) and item counts c_b at the parameters
    the window ran at."""

    means: torch.Tensor  # (n, parameters)
    counts: list[int]

    @property
    def items(self) -> list[float]:
        total = sum(self.counts)
        return [c / total for c in self.counts]  # each item weighs 1/N

    @property
    def reference(self) -> torch.Tensor:
        """The window's gradient averaged over its items: what one big batch gives."""
        return torch.tensor(self.items, dtype=torch.float64) @ self.means


def window_grads(probe: nn.Module, step: StepRecord, setup: Setup, names: list[str]) -> Window:
    with torch.no_grad():
        for n, p in probe.named_parameters():
            p.copy_(step.params[n])
    means = [
        vec(full_batch_grads(probe, setup.batch(b), loss=setup.loss), names) for b in step.window
    ]
    counts = [setup.loss.count(setup.batch(b).y) for b in step.window]
    return Window(torch.stack(means), counts)


@dataclass(frozen=True)
class Context:
    """What the predictions depend on besides the window's gradients."""

    k: int
    max_norm: float | None
    aligned: bool  # the reference has this window (or its part in this epoch): its policy applies
    stated: str  # the caller's last_window policy
    previous: torch.Tensor | None  # what the previous step saw: still in .grad if never zeroed
    scale: float | None  # the GradScaler's scale at this step
    replay: tuple | None = None  # (per-micro-batch multipliers, carry multiplier, codes)
    carried: int = 0  # the window's first micro-batches that were forwarded in an earlier epoch
    own: int = 0  # where the reference's window starts in it: `carried` when the reference closed
    # the earlier epoch's part at that epoch's end (or dropped it), 0 when the window is its own


@dataclass(frozen=True)
class Hypothesis:
    codes: frozenset[str]
    predicted: torch.Tensor
    parts: tuple[tuple[str, str], ...]  # (choice, option) for each of the four choices

    @property
    def how(self) -> dict[str, str]:
        return dict(self.parts)


POLICY_CODES = {  # (policy the loop applied to a short window, policy stated) → code
    ("divide_by_k", "divide_by_actual"): "LAST_WINDOW_UNDERWEIGHTED",
    ("divide_by_actual", "divide_by_k"): "LAST_WINDOW_AVERAGED",
}


def _parts(counts: list[int], own: int) -> list[float]:
    """Each part of a window that crosses an epoch's start weighted as a window of its own."""
    before, after = sum(counts[:own]), sum(counts[own:])
    return [c / before for c in counts[:own]] + [c / after for c in counts[own:]]


def _weights(w: Window, ctx: Context) -> Iterator[tuple[str, list[float], frozenset[str]]]:
    n, k, counts = len(w.counts), ctx.k, w.counts
    short = n - ctx.own < k  # the window the reference has is short
    options = [
        ("items", w.items, set(), "divide_by_actual"),
        ("means", [1 / n] * n, {"MEAN_OF_MEANS"}, "divide_by_actual"),
        ("undivided", [1.0] * n, {"LOSS_NOT_DIVIDED"}, None),
    ]
    if any(c != 1 for c in counts):  # reduction="sum" with no division at all
        options.append(("summed", [float(c) for c in counts], {"LOSS_NOT_DIVIDED"}, None))
    if n != k:  # loss / k on a window of another size (before "twice": the policy is likelier)
        options.append(("items_k", [x * n / k for x in w.items], set(), "divide_by_k"))
        options.append(("means_k", [1 / k] * n, {"MEAN_OF_MEANS"}, "divide_by_k"))
    if n > 1:  # loss / n, and the gradient / n again (p.grad /= n): 1/n of the mean
        options.append(("twice", [x / n for x in w.items], {"LOSS_DIVIDED_TWICE"}, None))
    if short:  # loss / k, and the gradient / k again
        twice_k = [x * n / k / k for x in w.items]
        options.append(("twice_k", twice_k, {"LOSS_DIVIDED_TWICE"}, "divide_by_k"))
    if ctx.own:
        options.append(("parts", _parts(counts, ctx.own), set(), "divide_by_actual"))
    for name, weights, codes, policy in options:
        code = POLICY_CODES.get((policy, ctx.stated)) if ctx.aligned and short else None
        yield name, weights, frozenset(codes | ({code} if code else set()))


def _zeroing(n: int, ctx: Context) -> Iterator[tuple[str, int, bool, frozenset[str]]]:
    # the earlier epoch's part still in .grad, though the reference closed or dropped it
    kept = frozenset({"LAST_WINDOW_CARRIED"} if ctx.own else ())
    yield "kept", 0, False, kept
    if ctx.previous is not None:
        yield "carried", 0, True, frozenset({"GRADS_NEVER_ZEROED"}) | kept
    for start in range(1, n):
        if start == ctx.carried:  # zeroed when the epoch began: the earlier epoch's part erased
            codes = frozenset() if ctx.own == start else frozenset({"CARRIED_WINDOW_ZEROED"})
            yield f"epoch {start}", start, False, codes
        else:
            yield f"from {start}", start, False, frozenset({"ZERO_GRAD_IN_WINDOW"})


def _clipping(ctx: Context) -> list[tuple[str, frozenset[str]]]:
    if ctx.max_norm is None:
        return [("none", frozenset())]
    options = [
        ("window", frozenset()),
        ("none", frozenset({"NOT_CLIPPED"})),
        ("micro", frozenset({"CLIP_PER_MICRO_BATCH"})),
    ]
    if ctx.scale is not None:  # clipping before unscale_: the threshold meets scaled gradients
        options.append(("scaled", frozenset({"UNSCALE_MISUSE"})))
    return options


def _clipped(how: str, carry, terms: torch.Tensor, ctx: Context) -> torch.Tensor:
    total = terms.sum(0) + (carry if carry is not None else 0)
    c = ctx.max_norm
    if how == "none":
        return total
    if how == "window":
        return clip(total, c)
    if how == "scaled":
        return clip(total * ctx.scale, c) / ctx.scale
    running = carry if carry is not None else torch.zeros_like(total)
    for t in terms:  # clip_grad_norm_ after each backward clips the running sum in .grad
        running = clip(running + t, c)
    return running


def reference_part(w: Window, ctx: Context) -> Window:
    """The part of the window the reference has: all of it, or what this epoch forwarded."""
    return Window(w.means[ctx.own :], w.counts[ctx.own :])


def expected(w: Window, ctx: Context) -> torch.Tensor:
    """What the reference loop's optimizer sees: the window's mean (divided by k for a short last
    window when that policy was stated), clipped once."""
    part = reference_part(w, ctx)
    g, m = part.reference, len(part.counts)
    if ctx.aligned and ctx.stated == "divide_by_k" and m < ctx.k:
        g = g * m / ctx.k
    return clip(g, ctx.max_norm)


def hypotheses(w: Window, ctx: Context) -> list[Hypothesis]:
    """Every combination, the reference's own first. A prediction of all zeros stands for
    zero_grad() called after the last backward and before optimizer.step()."""
    n = len(w.counts)
    zero = torch.zeros(w.means.shape[1], dtype=torch.float64)
    out = []
    # the replay of the logged GradScaler calls (also right for a correct loop: an unscale_
    # divides whatever .grad already held); without a scaler, or calls that cannot be matched to
    # the micro-batches, every micro-batch enters once
    scalers = [("calls in order", [1.0] * n, 1.0, frozenset())]
    if ctx.replay is not None:
        mults, carry_mult, codes = ctx.replay
        scalers = [("replayed" if codes else "calls in order", mults, carry_mult, codes)]
    for wname, weights, wcodes in _weights(w, ctx):
        for sname, mults, carry_mult, scodes in scalers:
            coef = torch.tensor(
                [a * b for a, b in zip(weights, mults, strict=True)], dtype=torch.float64
            )
            terms = coef[:, None] * w.means
            for zname, start, carried, zcodes in _zeroing(n, ctx):
                carry = ctx.previous * carry_mult if carried else None
                for cname, ccodes in _clipping(ctx):
                    predicted = _clipped(cname, carry, terms[start:], ctx)
                    parts = (
                        ("zero", zname),
                        ("weights", wname),
                        ("scaler", sname),
                        ("clip", cname),
                    )
                    out.append(Hypothesis(wcodes | scodes | zcodes | ccodes, predicted, parts))
    out.append(Hypothesis(frozenset({"ZERO_GRAD_BEFORE_STEP"}), zero, (("zero", "all"),)))
    return out
