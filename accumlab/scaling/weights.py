"""Loss scaling as weights: every normalisation and last-window policy of a `Recipe` gives each
item (sample element or real token) a weight, and an optimizer step's gradient is
Σ weight × ∇(item loss). The full-batch mean over a window gives every item 1/N; comparing the two
says which recipes reproduce the big batch. Introduced in lesson 03.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import MAX_STEPS, positive_float, positive_int
from ..data import IGNORE_INDEX, Data
from ..engine import Recipe, Trace, forward
from ..losses import Loss, get_loss
from . import _checks


@dataclass(frozen=True)
class Weights:
    """Per-sample view of one epoch under a Recipe (lesson 03). Tensors have one entry per sample.

    per_item:  weight of each item of the sample in the epoch's summed update (float64)
    reference: 1/N of the sample's window: what the full-batch mean over that window gives
               (also for a dropped window, whose samples then weigh 0 instead)
    counts:    items per sample (real tokens for token data)
    window:    index of the window holding the sample (counting dropped windows too)
    kept:      False where the last-window policy drops the sample
    """

    per_item: torch.Tensor
    reference: torch.Tensor
    counts: torch.Tensor
    window: torch.Tensor
    kept: torch.Tensor

    def matches_reference(self, rtol: float = 1e-12) -> bool:
        """True when every sample weighs exactly what the full-batch mean of its window gives."""
        rtol = positive_float("rtol", rtol, allow_zero=True)
        return bool(torch.allclose(self.per_item, self.reference, rtol=rtol, atol=0.0))


def effective_weights(counts, recipe: Recipe) -> Weights:
    """Each sample's per-item weight when a dataset whose samples hold `counts` items is run
    through `recipe` (one epoch, no update in between). Lesson 03.

    The weights come from `Recipe.scale` itself (the scaled loss is linear in the loss sum), so
    they describe exactly what `al.run` does. Raises ValueError for a window with zero real items,
    and, under "mean"/"none", for a micro-batch with zero real items (its mean would be 0/0).
    """
    if not isinstance(recipe, Recipe):
        raise ValueError(f"recipe must be an accumlab.Recipe, got {type(recipe).__name__}")
    counts = _checks.counts(counts)
    n, mb, k = len(counts), recipe.micro_batch_size, recipe.accumulation_steps
    if mb > n:
        raise ValueError(f"micro_batch_size must be at most the number of samples ({n}), got {mb}")
    micro = [range(i, min(i + mb, n)) for i in range(0, n, mb)]
    windows = [micro[i : i + k] for i in range(0, len(micro), k)]
    per_item = torch.zeros(n, dtype=torch.float64)
    reference = torch.zeros(n, dtype=torch.float64)
    window_of = torch.zeros(n, dtype=torch.long)
    kept = torch.ones(n, dtype=torch.bool)
    one = torch.ones((), dtype=torch.float64)
    for w, window in enumerate(windows):
        first, last = window[0][0], window[-1][-1]
        window_of[first : last + 1] = w
        window_count = sum(counts[first : last + 1])
        if window_count == 0:
            raise ValueError(
                f"window {w} (samples {first}..{last}) holds zero real items; cannot normalise by 0"
            )
        reference[first : last + 1] = 1.0 / window_count
        if recipe.last_window == "drop" and len(window) < k:
            kept[first : last + 1] = False  # never reaches the optimizer: weight 0
            continue
        for m in window:
            count = sum(counts[m.start : m.stop])
            if count == 0 and recipe.normalization in ("mean", "none"):
                raise ValueError(
                    f"micro-batch of samples {m.start}..{m.stop - 1} holds zero real items: its "
                    f"mean is 0/0; use normalization='global' or 'sum'"
                )
            # scale(1) = the factor each item's loss is multiplied by before backward
            per_item[m.start : m.stop] = float(recipe.scale(one, count, len(window), window_count))
    return Weights(per_item, reference, torch.tensor(counts), window_of, kept)


def sample_weights(
    n: int,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    normalization: str = "mean",
    last_window: str = "divide_by_actual",
    items_per_sample: int = 1,
) -> Weights:
    """Per-sample effective weights for `n` equal samples (lesson 03's short-last-window plot)."""
    n = positive_int("n", n, maximum=MAX_STEPS, why="one step of work per sample")
    items_per_sample = positive_int("items_per_sample", items_per_sample)
    recipe = Recipe(micro_batch_size, accumulation_steps, normalization, last_window)
    return effective_weights([items_per_sample] * n, recipe)


def item_loss_sums(loss: str | Loss, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Each sample's summed item loss, shape (n,): padding tokens contribute 0. Lesson 03."""
    loss = get_loss(loss)
    loss.check(pred, target)  # (n, 1) against (n,) would broadcast to (n, n) without an error
    if target.dim() == 0:
        raise ValueError("target must hold one row per sample, got a 0-d tensor")
    n = len(target)
    if loss.name == "mse":
        return F.mse_loss(pred, target, reduction="none").reshape(n, -1).sum(1)
    per_item = F.cross_entropy(
        pred.reshape(-1, pred.shape[-1]),
        target.reshape(-1),
        reduction="none",
        ignore_index=IGNORE_INDEX,
    )
    return per_item.reshape(n, -1).sum(1)


def _grads(model: nn.Module, objective) -> dict[str, torch.Tensor]:
    model = copy.deepcopy(model)  # the caller's model and its .grad stay untouched
    model.zero_grad(set_to_none=True)
    objective(model).backward()
    return {
        n: p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
        for n, p in model.named_parameters()
    }


def weighted_grads(model: nn.Module, data: Data, per_item, *, loss: str | Loss = "mse"):
    """Gradient of Σ_j per_item[j] × (sample j's summed loss), in one backward. Lesson 03 uses it to
    check that `effective_weights` predicts what `al.run` accumulates."""
    _validate.model("model", model)
    _validate.data("data", data)
    w = _checks.per_sample("per_item", per_item, len(data), "data")

    def objective(m: nn.Module) -> torch.Tensor:
        sums = item_loss_sums(loss, forward(m, data, "the whole data"), data.y)
        return (w.to(sums.dtype) * sums).sum()

    return _grads(model, objective)


def mean_loss(model: nn.Module, data: Data, *, loss: str | Loss = "mse") -> float:
    """The full-batch mean loss over every real item of `data` (what a window's log should show).
    Lesson 03."""
    _validate.model("model", model)
    _validate.data("data", data)
    loss_fn = get_loss(loss)
    with torch.no_grad():
        total, count = loss_fn(forward(model, data, "the whole data"), data.y)
    if count == 0:
        raise ValueError("data holds zero real items (all labels are padding)")
    return float(total) / count


def epoch_grads(trace: Trace) -> dict[str, torch.Tensor]:
    """Sum of the gradients every optimizer step saw (with optimizer=None and SGD in mind: the
    epoch's update ÷ -lr). Lesson 03."""
    _checks.trace(trace)
    if not trace.window_grads:
        return {n: torch.zeros_like(p) for n, p in trace.initial_params.items()}
    return {n: sum(g[n] for g in trace.window_grads) for n in trace.window_grads[0]}


def scale_grads(grads: dict[str, torch.Tensor], factor: float) -> dict[str, torch.Tensor]:
    """Every gradient multiplied by `factor` (to compare a k-times-too-large gradient). Lesson 03."""
    _validate.tensor_dict("grads", grads)
    factor = _validate.finite_float("factor", factor)  # NaN would turn every gradient into NaN
    return {n: g * factor for n, g in grads.items()}


def update_of(trace: Trace) -> dict[str, torch.Tensor]:
    """Total parameter change over a run: last parameters minus the initial ones. Lesson 03."""
    _checks.trace(trace)
    if not trace.params:
        raise ValueError("the trace holds no optimizer step")
    return {n: trace.params[-1][n] - p for n, p in trace.initial_params.items()}


@dataclass(frozen=True)
class WindowCheck:
    """One window of an epoch against the full-batch gradient over the same samples (lesson 03)."""

    window: int
    start: int  # first sample
    stop: int  # one past the last sample
    micro_batches: int
    kept: bool
    max_rel: float  # 1.0 for a dropped window: its gradient is missing entirely


@one_thread()
def window_errors(
    recipe: Recipe, model: nn.Module, data: Data, *, loss: str | Loss = "mse"
) -> list[WindowCheck]:
    """Run one epoch of `recipe` (no updates) and compare each window's gradient with the full
    batch over that window's samples. Lesson 03."""
    from ..compare import grad_diff
    from ..engine import run
    from ..reference import full_batch_grads

    trace = run(recipe, model, data, loss=loss, optimizer=None, record_grads=False)
    n, size = len(data), recipe.window_size
    checks = []
    for w, start in enumerate(range(0, n, size)):
        stop = min(start + size, n)
        micro = -(-(stop - start) // recipe.micro_batch_size)
        kept = w < trace.steps  # only the last window can be dropped
        err = 1.0
        if kept:
            full = full_batch_grads(model, data[start:stop], loss=loss)
            err = grad_diff(trace.window_grads[w], full).max_rel
        checks.append(WindowCheck(w, start, stop, micro, kept, err))
    return checks


def logged_losses(trace: Trace) -> dict[str, list[float]]:
    """Per window, the numbers a training log might print (lesson 03):

    window:        item-weighted mean loss over the window (what the full batch reports)
    sum_of_scaled: sum of the scaled micro-batch losses backward saw
    last_scaled:   the last micro-batch's scaled loss (a common logging slip)
    k_times_last:  k × that (the usual attempt to undo the division)
    """
    _checks.trace(trace)
    per_window: dict[int, list[float]] = {}
    backward = [e for e in trace.events if e.kind == "backward"]
    for event, scaled in zip(backward, trace.scaled_losses, strict=True):
        per_window.setdefault(event.window, []).append(scaled)
    k = trace.recipe.accumulation_steps
    windows = sorted(per_window)
    return {
        "window": [trace.window_losses[w] for w in windows],
        "sum_of_scaled": [sum(per_window[w]) for w in windows],
        "last_scaled": [per_window[w][-1] for w in windows],
        "k_times_last": [k * per_window[w][-1] for w in windows],
    }


def effective_batch_size(micro_batch_size: int, accumulation_steps: int, ranks: int = 1) -> int:
    """Samples per optimizer step: micro-batch × accumulation steps × data-parallel ranks.
    Lessons 10 and 13."""
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    accumulation_steps = positive_int("accumulation_steps", accumulation_steps)
    ranks = positive_int("ranks", ranks)
    return micro_batch_size * accumulation_steps * ranks


def linear_scaled_lr(base_lr: float, base_batch: int, batch: int) -> float:
    """The linear scaling rule of thumb (Goyal et al. 2017): lr grows with the batch size.
    It is a first-order argument for SGD; lesson 13 measures where it stops holding."""
    base_lr = positive_float("base_lr", base_lr)
    base_batch = positive_int("base_batch", base_batch)
    batch = positive_int("batch", batch)
    lr = base_lr * batch / base_batch
    if not math.isfinite(lr):  # a learning rate of inf trains nothing: say it before a run does
        raise ValueError(
            f"base_lr={base_lr!r} × batch={batch} / base_batch={base_batch} overflows to {lr}"
        )
    return lr


@one_thread()
def linear_scaling_gap(
    model: nn.Module, data: Data, micro_batch_size: int, accumulation_steps: int, lrs, *, loss="mse"
) -> list[dict[str, float]]:
    """k plain SGD steps on micro-batches at lr η vs ONE accumulated step at lr k·η (the linear
    scaling rule) over the same samples. Per lr: the parameter gap relative to the update size.
    The two agree to first order in η, so the relative gap shrinks in proportion to η. Lesson 13."""
    from ..engine import run

    _validate.model("model", model)
    _validate.data("data", data)
    k = positive_int("accumulation_steps", accumulation_steps)
    window = data.first_window(micro_batch_size, k)
    lrs = [positive_float(f"lrs[{i}]", lr) for i, lr in enumerate(_validate.sequence("lrs", lrs))]
    _validate.within_max_steps(
        f"len(lrs) × 2k micro-steps = {len(lrs)} × {2 * k}", 2 * k * len(lrs)
    )
    rows = []
    for lr in lrs:
        small = run(Recipe(micro_batch_size, 1), model, window, loss=loss, optimizer="sgd", lr=lr)
        big = run(Recipe(micro_batch_size, k), model, window, loss=loss, optimizer="sgd", lr=k * lr)
        gap = _norm({n: small.params[-1][n] - big.params[-1][n] for n in big.initial_params})
        step = _norm(update_of(big))
        rows.append({"lr": lr, "gap": gap, "step": step, "relative_gap": gap / step})
    return rows


def _norm(tensors: dict[str, torch.Tensor]) -> float:
    return float(torch.cat([t.reshape(-1).double() for t in tensors.values()]).norm())
