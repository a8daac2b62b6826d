"""The gradient noise scale of McCandlish et al. (2018), "An Empirical Model of Large-Batch
Training": B_simple = tr(Σ) / |G|², from per-sample gradients computed with `torch.func` (lesson 13).

G is the true (population) gradient and Σ the covariance of one sample's gradient, so a batch of B
samples has gradient noise tr(Σ) / B. B_simple is the batch size at which that noise equals the
signal |G|²: below it, doubling the batch halves the noise and roughly halves the steps needed;
far above it, the gradient is already nearly exact and extra samples buy little.

The lesson's problem is linear regression with isotropic Gaussian inputs, x ~ N(0, I_d),
y = x·w* + σ ε, loss ½ (x·w − y)². There B_simple has a closed form to check the estimate against:
with e = w − w*, G = e and tr(Σ) = (d + 1)|e|² + d σ², so at excess loss ℓ = ½|e|²,
B_simple = d + 1 + d σ² / (2ℓ). It grows as the loss falls, as the paper observed in real models.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .. import _validate
from .._threads import one_thread
from .._validate import positive_float, positive_int


@dataclass(frozen=True)
class Problem:
    """Linear regression y = x·w* + noise · ε with x ~ N(0, I): `features` = d, `noise` = σ."""

    features: int = 8
    noise: float = 1.0

    def __post_init__(self):
        # stored as Python numbers, whatever number type they came as (frozen: set through object)
        object.__setattr__(self, "features", positive_int("features", self.features))
        object.__setattr__(self, "noise", positive_float("noise", self.noise))
        _validate.fits_in_memory(
            f"Problem(features={self.features})'s parameters", 8 * self.features
        )

    def b_simple(self, excess: float) -> float:
        """The exact B_simple at any point whose excess loss is `excess`."""
        excess = positive_float("excess", excess)
        d = self.features
        return d + 1 + d * self.noise**2 / (2 * excess)

    def moments(self, excess: float) -> dict:
        """The exact |G|² = 2ℓ and tr(Σ) = (d + 1)·2ℓ + dσ² at excess loss ℓ = `excess`."""
        positive_float("excess", excess)
        d = self.features
        return {"g_squared": 2 * excess, "trace_sigma": (d + 1) * 2 * excess + d * self.noise**2}

    def point(self, excess: float, seed: int = 0) -> torch.Tensor:
        """A parameter error e = w − w* with ½|e|² = `excess`, in a random direction."""
        excess = positive_float("excess", excess)
        seed = _validate.seed("seed", seed)
        e = torch.randn(
            self.features, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
        )
        return e * math.sqrt(2 * excess) / e.norm()

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """n samples (x, y − x·w*): with w* = 0 the parameters ARE the error e."""
        n = positive_int("n", n)
        _validate.instance("generator", generator, torch.Generator, "a torch.Generator")
        _validate.fits_in_memory(
            f"n={n} samples of {self.features} features", 8 * n * (self.features + 1)
        )
        x = torch.randn(n, self.features, generator=generator, dtype=torch.float64)
        return x, self.noise * torch.randn(n, generator=generator, dtype=torch.float64)


def check_problem(problem) -> Problem:
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be an al.scale.Problem, got {type(problem).__name__}")
    return problem


def _loss_one(w, x, y):
    return 0.5 * (x @ w - y) ** 2


def per_sample_grads(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One gradient per sample, shape (n, d): `torch.func.vmap` of `torch.func.grad` of the loss."""
    d = len(_validate.tensor("w", w, dim=1, floating=True))
    n = len(_validate.tensor("x", x, dim=2, floating=True))
    _validate.tensor("y", y, dim=1, floating=True)
    if x.shape[1] != d or y.shape != (n,):
        raise ValueError(
            f"x must have shape (n, {d}) and y shape (n,) for w of shape ({d},), got x of shape "
            f"{tuple(x.shape)} and y of shape {tuple(y.shape)}"
        )
    return torch.func.vmap(torch.func.grad(_loss_one), in_dims=(None, 0, 0))(w, x, y)


def _moments(g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """tr(Σ), |mean|² and the unbiased |G|² of per-sample gradients g (..., n, P), batch by batch:
    the one estimator `noise_scale` and `estimator_bias` both use."""
    n = g.shape[-2]
    mean = g.mean(dim=-2)
    trace = ((g - mean.unsqueeze(-2)) ** 2).sum(dim=(-2, -1)) / (n - 1)
    mean_sq = (mean * mean).sum(dim=-1)
    return trace, mean_sq, mean_sq - trace / n  # E|mean|² = |G|² + tr(Σ)/n


def noise_scale(grads: torch.Tensor) -> dict:
    """B_simple = tr(Σ) / |G|² from per-sample gradients `grads` (n, P). Lesson 13.

    tr(Σ) is the sample covariance's trace (divided by n − 1); |G|² is estimated without bias as
    |mean|² − tr(Σ) / n, because the mean of n noisy gradients is itself noisy by tr(Σ) / n.
    `b_naive` = tr(Σ) / |mean|² leaves that out: it reads B_simple / (1 + B_simple / n) on average,
    far too small when n is not much larger than B_simple.
    """
    if not isinstance(grads, torch.Tensor) or grads.dim() != 2 or len(grads) < 2:
        shape = tuple(grads.shape) if isinstance(grads, torch.Tensor) else type(grads).__name__
        raise ValueError(f"grads must be a (samples ≥ 2, parameters) tensor, got {shape}")
    _validate.tensor("grads", grads, finite=True)
    n = len(grads)
    trace, mean_sq, g2 = (float(v) for v in _moments(grads.double()))
    if g2 <= 0:  # no signal measurable above the noise: a ratio would be inf or negative
        raise ValueError(
            f"grads must carry a mean gradient above its own noise: |mean|² = {mean_sq:.3g} is not "
            f"above tr(Σ)/n = {trace / n:.3g} with n = {n} samples, so |G|² cannot be told from 0 "
            "(all-zero gradients included); B_simple is beyond what these samples resolve"
        )
    return {
        "samples": n,
        "trace_sigma": trace,
        "g_squared": g2,
        "b_simple": trace / g2,
        "b_naive": trace / mean_sq,
    }


def _draws(problem: Problem, excess: float, samples: int, draws: int, seed: int) -> torch.Tensor:
    """Per-sample gradients of `draws` independent batches: (draws, samples, d), vectorised."""
    e = problem.point(excess, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(draws, samples, problem.features, generator=gen, dtype=torch.float64)
    eps = problem.noise * torch.randn(draws, samples, generator=gen, dtype=torch.float64)
    # the gradient of ½ (x·e − ε)² is (x·e − ε) x, sample by sample (the same as per_sample_grads)
    return (x @ e - eps).unsqueeze(-1) * x


@one_thread()
def estimator_bias(
    problem: Problem, excess: float, *, samples: int = 64, draws: int = 500, seed: int = 0
) -> dict:
    """The naive tr(Σ)/|mean|² against the bias-corrected estimate, each averaged over `draws`
    batches of `samples` per-sample gradients (numerators and denominators averaged separately,
    as an exponential moving average does in training), next to the exact B_simple. Lesson 13."""
    check_problem(problem)
    excess = positive_float("excess", excess)
    n = positive_int("samples", samples, minimum=2)
    draws = positive_int("draws", draws)
    seed = _validate.seed("seed", seed)
    _validate.fits_in_memory(
        f"draws × samples = {draws} × {n} gradients of {problem.features} features",
        3 * 8 * draws * n * problem.features,
    )
    trace, mean_sq, g2 = _moments(_draws(problem, excess, n, draws, seed))
    return {
        "samples": n,
        "draws": draws,
        "naive": float(trace.mean() / mean_sq.mean()),
        "corrected": float(trace.mean() / g2.mean()),
        "exact": problem.b_simple(excess),
        "predicted_naive": problem.b_simple(excess) / (1 + problem.b_simple(excess) / n),
    }


@one_thread()
def measure_b_simple(
    problem: Problem, excess: float, *, samples: int = 8192, seed: int = 0
) -> dict:
    """B_simple estimated from `samples` per-sample gradients at a point of excess loss `excess`,
    next to the closed form."""
    check_problem(problem)
    samples = positive_int("samples", samples, minimum=2)
    seed = _validate.seed("seed", seed)
    _validate.fits_in_memory(  # x, its per-sample gradients and their deviations from the mean
        f"samples={samples} of {problem.features} features", 3 * 8 * samples * problem.features
    )
    gen = torch.Generator().manual_seed(seed + 1)
    x, y = problem.sample(samples, gen)
    out = noise_scale(per_sample_grads(problem.point(excess, seed), x, y))
    out["exact"] = problem.b_simple(excess)
    out["excess"] = excess
    return out
