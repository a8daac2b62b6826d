"""The noise scale measured by accumulation itself: McCandlish et al. (2018), Appendix A (lesson 13).

An accumulation loop already computes gradients at two batch sizes: each micro-batch's gradient
(B_small = b samples) and the window's accumulated gradient (B_big = k·b). The expected squared norm
of a batch-B gradient is |G|² + tr(Σ)/B, so two sizes give both unknowns:

    |G|²  = (B_big |G_big|² − B_small |G_small|²) / (B_big − B_small)
    tr(Σ) = (|G_small|² − |G_big|²) / (1/B_small − 1/B_big)

Each window's pair is unbiased but noisy (either can come out negative), so B_simple = tr(Σ)/|G|²
is read from exponential moving averages of the two, as practitioners do: averaging the ratio
would not remove its bias. No per-sample gradients are needed, so it works for any model; the
price is one squared norm per parameter per micro-batch, summed on the gradients' device.
"""

from __future__ import annotations

import math
import warnings
from functools import partial

import torch
from torch import nn

from .. import _validate
from .._validate import positive_int
from .grad_norms import _any_nonzero, _host_sum, _ranks, _sq_norm


def _sizes(b_small, b_big) -> tuple[int, int]:
    # batch sizes count samples: 4.5 is a typo, not a size the formulas below can mean
    small = positive_int("b_small", b_small)
    big = positive_int("b_big", b_big)
    if big <= small:
        raise ValueError(f"b_big must be larger than b_small={small}, got {b_big!r}")
    return small, big


def two_batch_estimate(small_sq, big_sq, b_small, b_big) -> dict:
    """Unbiased |G|² and tr(Σ) from the squared norms of a batch-`b_small` gradient and a
    batch-`b_big` gradient (McCandlish et al. 2018, Appendix A). Lesson 13."""
    s = _validate.positive_float("small_sq", small_sq, allow_zero=True)
    g = _validate.positive_float("big_sq", big_sq, allow_zero=True)
    small, big = _sizes(b_small, b_big)
    return {
        "g_squared": (big * g - small * s) / (big - small),
        "trace_sigma": (s - g) / (1 / small - 1 / big),
    }


class NoiseScaleEMA:
    """Exponential moving averages of |G|² and tr(Σ), fed one two-batch pair per window.

    `update(small_sq, big_sq, b_small, b_big)` after every window; `b_simple` is the ratio of the
    two averages, or None while the averaged |G|² is not positive or the averaged tr(Σ) is
    negative (too few windows to tell the signal from the noise). `beta=None` weighs every window alike (a running mean), for a
    fixed point; 0 keeps only the last window. Lesson 13."""

    def __init__(self, beta: float | None = 0.99):
        if beta is not None:
            beta = _validate.positive_float("beta", beta, allow_zero=True)
            if beta >= 1:
                raise ValueError(f"beta must be below 1 (an average that moves), got {beta!r}")
        self.beta = beta
        self.g_squared = 0.0
        self.trace_sigma = 0.0
        self.windows = 0

    def update(self, small_sq, big_sq, b_small, b_big) -> None:
        est = two_batch_estimate(small_sq, big_sq, b_small, b_big)
        self.windows += 1
        keep = self.beta if self.beta is not None else 1 - 1 / self.windows
        self.g_squared = keep * self.g_squared + (1 - keep) * est["g_squared"]
        self.trace_sigma = keep * self.trace_sigma + (1 - keep) * est["trace_sigma"]

    @property
    def b_simple(self) -> float | None:
        # both averages carry the same (1 − beta^n) start-up factor: it cancels in the ratio
        if self.g_squared <= 0 or self.trace_sigma < 0:
            return None
        return self.trace_sigma / self.g_squared


class AccumulationNoise(NoiseScaleEMA):
    """Drop into your own accumulation loop: hooks on `model`'s parameters read each micro-batch's
    gradient and the window's accumulated gradient, and feed `NoiseScaleEMA`. Lesson 13.

        meter = al.scale.AccumulationNoise(model, micro_batch_size=b, accumulation_steps=k)
        for window in windows:
            for x, y in window:
                (loss_fn(model(x), y) / k).backward()
            meter.window_done()  # after the last backward, before clipping or zero_grad
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # if the loop clips
            optimizer.step()
            optimizer.zero_grad()
        print(meter.b_simple)

    `loss_scale` is what each micro-batch's MEAN loss was multiplied by before backward (1/k, the
    default). Equal micro-batches only: the formulas take every micro-batch to hold
    `micro_batch_size` samples, so a window whose forwards (with grad enabled, first argument's
    dim 0) saw unequal sizes — a short last micro-batch — raises ValueError naming them, and its
    norms are dropped. Zero the gradients after every window. A branch or expert a micro-batch
    skips counts as a zero gradient there. A hook per parameter sees each micro-batch's gradient
    on its way into `.grad`; squared norms are summed on the gradients' device and read back in
    `window_done`. Call it before anything that changes `.grad` (clipping, `unscale_`,
    `zero_grad`): the hooks saw the gradients unchanged, so a clip that bites in between makes the
    reading far too high, or, clipped harder, leaves the averaged |G|² negative: then it reads None.

    For one process or DDP; sharded parameters (FSDP) are untested. Under DDP, `.grad` at
    `window_done` holds the mean over every rank's k·b samples, while the hooks see this rank's
    micro-batches before any all-reduce, so pass `ranks` = the number of processes whose
    gradients are averaged (B_big = ranks·k·b). With a process group of more than one process
    initialised and no `ranks`, the meter refuses to guess.
    GradScaler: call `window_done(grad_scale=scaler.get_scale())` before `scaler.unscale_` or
    `scaler.step` (`get_scale` reads the scale back: one host sync per window); a window whose
    gradients overflowed is skipped (counted in `skipped`), as the scaler skips its step.
    """

    def __init__(
        self,
        model: nn.Module,
        micro_batch_size: int,
        accumulation_steps: int,
        *,
        beta: float | None = 0.99,
        loss_scale: float | None = None,
        ranks: int | None = None,
    ):
        super().__init__(beta)
        _validate.model("model", model)
        self.b = positive_int("micro_batch_size", micro_batch_size)
        self.k = positive_int("accumulation_steps", accumulation_steps, minimum=2)
        scale = 1 / self.k if loss_scale is None else loss_scale
        self.loss_scale = _validate.positive_float("loss_scale", scale)
        self._ranks = None if ranks is None else positive_int("ranks", ranks)
        self.ranks = _ranks(self._ranks)
        self._params = [p for p in model.parameters() if p.requires_grad]
        if not self._params:
            raise ValueError("model must have parameters that require gradients")
        self.skipped = 0  # windows whose gradients held inf or NaN (GradScaler overflow)
        self._calls = {p: 0 for p in self._params}
        self._sq: dict = {}  # device → Σ over micro-batches of |gradient|², a tensor there
        self._handles = [p.register_hook(partial(self._seen, p)) for p in self._params]
        self._sizes: list = []  # rows of each forward this window: the formulas need them equal
        self._size_warned = False
        self._handles.append(model.register_forward_pre_hook(self._forward))

    def _forward(self, module, args) -> None:
        # evaluation (no_grad) adds no gradient, so it is not a micro-batch of the window
        if torch.is_grad_enabled() and args and isinstance(args[0], torch.Tensor) and args[0].ndim:
            self._sizes.append(int(args[0].shape[0]))

    def _seen(self, param: torch.Tensor, grad: torch.Tensor) -> None:
        # grad: this backward's contribution to param.grad, this rank's alone (DDP all-reduces
        # after accumulation); summed where it lives, so no host sync in the middle of backward
        sq = _sq_norm(grad)
        self._sq[sq.device] = self._sq[sq.device] + sq if sq.device in self._sq else sq
        self._calls[param] += 1

    def window_done(self, *, grad_scale: float | None = None) -> float | None:
        """Close a window of `accumulation_steps` backwards; returns the current `b_simple`.
        `grad_scale`: the GradScaler scale the losses were multiplied by in this window; given
        (1.0 included: a scaler backs off to it), an overflowed window is skipped, not refused."""
        scaler = grad_scale is not None
        grad_scale = _validate.positive_float(
            "grad_scale", 1.0 if grad_scale is None else grad_scale
        )
        # a micro-batch that skips a branch or expert adds a zero gradient there: a parameter
        # may see fewer than k backwards (0 when unused all window), never more, and the most
        # used ones see exactly k
        counts = sorted(set(self._calls.values()))
        idle = [p.grad for p in self._params if not self._calls[p] and p.grad is not None]
        if counts[-1] != self.k or _any_nonzero(idle):
            raise ValueError(
                f"accumulation_steps={self.k}, but the parameters saw {counts} backward passes "
                f"since the last window_done(): call it once after every {self.k} backwards, "
                "and zero the gradients after it"
            )
        sizes, self._sizes = self._sizes, []
        # unequal among themselves, not ≠ b: dim 0 of a sequence-first input is not its batch
        if len(set(sizes)) > 1:
            self._reset()
            raise ValueError(
                f"micro_batch_size={self.b}, but this window's micro-batches held {sizes} "
                "samples (dim 0 of the model's first input): the two-batch formulas need equal micro-batches (B_small = b, "
                "B_big = k·b); leave a window with a short micro-batch out of the meter "
                "(its norms are dropped)"
            )
        if sizes and sizes[0] != self.b and not self._size_warned:
            self._size_warned = True  # a warning, not an error: see above; once per meter
            warnings.warn(
                f"micro_batch_size={self.b}, but every micro-batch's first input has dim 0 = "
                f"{sizes[0]}: if dim 0 is the batch, B_simple reads {self.b}/{sizes[0]} of the truth",
                stacklevel=2,
            )
        used = [p for p in self._params if self._calls[p]]
        if self._ranks is None:
            self.ranks = _ranks(None)  # a process group initialised after the meter was made
        contrib = _host_sum(self._sq.values())
        total = _host_sum([_sq_norm(p.grad) for p in used])
        self._reset()
        # each micro-batch gradient g_j = contribution / scale; the window's mean gradient
        # (batch ranks·k·b) = .grad / (scale · k)
        scale = self.loss_scale * grad_scale
        small_sq = contrib / scale**2 / self.k
        big_sq = total / (scale * self.k) ** 2
        if not (math.isfinite(small_sq) and math.isfinite(big_sq)):
            if scaler:  # a GradScaler overflow: the scaler skips this step too
                self.skipped += 1
                return self.b_simple
            raise ValueError("the gradients hold NaN or inf: no noise scale can be read")
        self.update(small_sq, big_sq, self.b, self.b * self.k * self.ranks)
        return self.b_simple

    def _reset(self) -> None:
        for p in self._params:
            self._calls[p] = 0
        self._sq = {}

    def remove(self) -> None:
        """Take the hooks off the model."""
        for h in self._handles:
            h.remove()
        self._handles = []


def linear_model(problem, excess: float, seed: int = 0) -> nn.Module:
    """On lesson 13's regression problem, where the exact B_simple is known: `nn.Linear(d, 1,
    bias=False)` whose weight is `problem.point(excess, seed)`; with w* = 0 the weights ARE the
    error, so the exact B_simple here is `problem.b_simple(excess)`."""
    from .noise import check_problem

    check_problem(problem)
    model = nn.Linear(problem.features, 1, bias=False, dtype=torch.float64)
    with torch.no_grad():
        model.weight.copy_(problem.point(excess, seed).unsqueeze(0))
    return model


def _draws(problem, b: int, k: int, n: int, seed: int):
    """x (windows, k, b, d) and y (windows, k, b): every sample of every window, drawn at once."""
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(n, k, b, problem.features, generator=gen, dtype=torch.float64)
    y = problem.noise * torch.randn(n, k, b, generator=gen, dtype=torch.float64)  # w* = 0
    return x, y


def micro_batch_windows(
    problem, micro_batch_size: int, accumulation_steps: int, windows: int, seed: int = 0
) -> list:
    """`windows` lists of `accumulation_steps` (x, y) micro-batches of `micro_batch_size` samples
    from `problem`: what a learner's loop iterates over (the same draws `two_batch_noise` uses)."""
    from .noise import check_problem

    check_problem(problem)
    b = positive_int("micro_batch_size", micro_batch_size)
    k = positive_int("accumulation_steps", accumulation_steps)
    n = positive_int("windows", windows)
    _validate.within_max_steps(f"windows × accumulation_steps = {n} × {k}", n * k)
    seed = _validate.seed("seed", seed)
    _validate.fits_in_memory(
        f"windows × accumulation_steps × micro_batch_size = {n} × {k} × {b} samples",
        2 * 8 * n * k * b * (problem.features + 1),
    )
    x, y = _draws(problem, b, k, n, seed)
    return [[(x[w, j], y[w, j]) for j in range(k)] for w in range(n)]


def two_batch_noise(
    problem,
    excess: float,
    *,
    micro_batch_size: int = 8,
    accumulation_steps: int = 16,
    windows: int = 400,
    seed: int = 0,
    beta: float | None = None,
) -> dict:
    """The two-batch estimate at a fixed point of excess loss `excess`, vectorised, with the exact
    value. Lesson 13. Numerators and denominators are averaged apart over the windows: all alike
    (`beta=None`), or with the weights (1 − β) β^age an exponential moving average gives them
    (written out here, not recursed, so that `NoiseScaleEMA` has something to be checked against)."""
    from .noise import check_problem

    check_problem(problem)
    b = positive_int("micro_batch_size", micro_batch_size)
    k = positive_int("accumulation_steps", accumulation_steps, minimum=2)
    n = positive_int("windows", windows)
    seed = _validate.seed("seed", seed)
    if beta is not None:
        NoiseScaleEMA(beta)  # the same bounds: 0 ≤ β < 1
    _validate.fits_in_memory(
        f"windows × accumulation_steps × micro_batch_size = {n} × {k} × {b} samples",
        3 * 8 * n * k * b * problem.features,
    )
    e = problem.point(excess, seed)
    x, y = _draws(problem, b, k, n, seed)
    micro = ((x @ e - y).unsqueeze(-1) * x).mean(dim=2)  # (windows, k, d): each micro-batch's
    small_sq = (micro * micro).sum(dim=2).mean(dim=1)  # mean over the window of |G_small|²
    big = micro.mean(dim=1)  # the accumulated window: batch k·b
    big_sq = (big * big).sum(dim=1)
    age = torch.arange(n - 1, -1, -1, dtype=torch.float64)  # the newest window has age 0
    # beta=None: the plain mean; else the EMA's weights, which sum to 1 − β^n (cancels in the ratio)
    weights = (
        torch.full((n,), 1 / n, dtype=torch.float64) if beta is None else (1 - beta) * beta**age
    )
    small_sq, big_sq = (weights * small_sq).sum(), (weights * big_sq).sum()
    # the estimate is linear in the two norms: the average of per-window estimates, exactly
    norm = float(weights.sum())
    est = two_batch_estimate(float(small_sq) / norm, float(big_sq) / norm, b, k * b)
    return {
        "micro_batch_size": b,
        "accumulation_steps": k,
        "windows": n,
        "beta": beta,
        **est,
        "b_simple": est["trace_sigma"] / est["g_squared"] if est["g_squared"] > 0 else None,
        "exact": problem.b_simple(excess),
    }
