"""Exercise 13.2's draws and the estimators it compares with, computed by the checker on the
windows the answer saw (the full two-batch estimate, the partial ones it refuses, two mistakes)."""

from __future__ import annotations

import torch

# the two-batch exercise: windows of k micro-batches of b samples at a fixed point of excess loss,
# on three problems of three noises (exact B_simple 13.5, 21.5 and 17.0) whose noise the learner is not
# told, each with a minimum w* away from 0 (y carries x·w*, the model's weight is w* + e): the
# gradients are those of the error e, but |model.weight|² is not |e|², so section 4's closed form
# d + 1 + dσ²/|e|² cannot be filled in from the model. The learner's number is compared with the
# estimator asked for, computed by the checker on the same draws. The problems differ in
# micro-batch size b and accumulation steps k too, so an answer must read them from `windows`.
WINDOWS, EXCESS = 200, 2.0
# (seed, noise σ, b, k) of the first two problems, fixed; the third (σ 2.0, exact B_simple 17.0)
# takes its seed from LAST_SEEDS, drawn afresh per check
PROBLEMS = ((5, 1.5, 4, 8), (6, 2.5, 8, 6))
LAST_PROBLEM = (2.0, 4, 8)
# the seeds (of 0-399) on which every partial estimator that lies inside the accepted range, or
# within 0.5 % of it, on the first two problems lies more than 0.5 % outside it; every accepted
# estimator lies within 9 % of the full one; and the full one more than 13 % from the numbers the
# three problems of fixed seeds 5, 6 and 24 (σ 2.5) gave: each partial estimator is refused on
# some problem, and numbers typed in from those runs are not (tests/test_scale.py checks it)
LAST_SEEDS = (7, 8, 13, 14, 16, 18, 20, 22, 28, 32, 34, 37, 45, 47, 48, 51, 59, 62, 68, 79, 82,
              86, 97, 98, 102, 107, 108, 112, 113, 115, 116, 131, 133, 135, 138, 149, 152, 156,
              161, 162)  # fmt: skip
# Relative to the two norms averaged over all 200 windows and all k micro-batches of each, on the
# same draws. Measured (40 seeds × 3 problems, σ 1.5 or 2.5, excess 1 or 2, b = 4, k = 8): an EMA
# with β = 0.99 (NoiseScaleEMA's default) lies within ±8.4 % of it (b = 8, k = 6, σ 1.5 and 2.5,
# 40 seeds: every accepted EMA within ±5.6 %); the spread of the estimate itself around the
# exact value is ±3-4 % (one standard deviation). Estimators that keep part of the loop's
# gradients spread far wider — an EMA with β = 0.95 (about 39 windows' weight) −22 % … +39 %, one
# micro-batch per window −27 % … +60 % — so whether they land inside 10 % is luck: they are
# recognised on the same draws and refused by name, whatever the seed.
TOLERANCE_13_2 = 0.10
PARTIAL_BETAS = (0.9, 0.95, 0.96, 0.97, 0.98)  # accepted: β ≥ 0.99, or a plain mean (β = 1)
# every β the prompt allows, on a grid fine enough that an EMA between two of them lies nearer
# the accepted ones than any partial estimator does (a β of 0.992 or 0.996 was refused with 3)
ACCEPTED_BETAS = tuple(round(0.99 + 0.0005 * i, 4) for i in range(20)) + (0.9998,)
PARTIAL = 0.005  # an answer this close to a partial estimator (and farther from the full one) is it
# An EMA's value moves continuously with β, so inside [the smallest, the largest] value the
# accepted estimators give it may be any β ≥ 0.99 (one between two grid points can sit nearer a
# partial estimator than any grid point does): only an answer outside that range, by more than
# this, is judged a partial estimator
INSIDE = 0.002


def _problem(seed: int, noise: float, b: int, k: int):
    """(problem, error e, minimum w*, windows of (x, y) with y = x·w* − (x·e − y₀)): the
    gradients at w* + e are those of lesson 13's problem at e (w* = 0)."""
    from ..scale import two_batch as tb
    from ..scale.noise import Problem

    problem = Problem(noise=noise)
    e = problem.point(EXCESS, seed)
    shift = torch.randn(problem.features, generator=torch.Generator().manual_seed(seed + 100),
                        dtype=torch.float64)  # fmt: skip
    shift = shift * 2 * e.norm() / shift.norm()  # |w*| = 2|e|: far from the closed form's w* = 0
    windows = [[(x, y + x @ shift) for x, y in window]
               for window in tb.micro_batch_windows(problem, b, k, WINDOWS, seed)]  # fmt: skip
    return problem, e, shift, windows


def _ratio(small: float, big: float, b: int, k: int) -> float:
    from ..scale.two_batch import two_batch_estimate

    est = two_batch_estimate(small, big, b, k * b)
    return est["trace_sigma"] / est["g_squared"]


def _same_draws(e, shift, windows) -> dict:
    """On the windows the answer saw: the estimator asked for (the norms averaged over every
    window and micro-batch), the estimators that keep part of them, and two common mistakes."""
    from ..scale.two_batch import two_batch_estimate

    w = e + shift
    b, k = len(windows[0][0][0]), len(windows[0])
    ratio = lambda small, big: _ratio(small, big, b, k)  # noqa: E731
    micro = torch.stack(
        [
            torch.stack([((x @ w - y).unsqueeze(1) * x).mean(0) for x, y in window])
            for window in windows
        ]
    )  # fmt: skip  (windows, k, d)
    small = (micro**2).sum(2)  # (windows, k): each micro-batch's |G_small|²
    big = micro.mean(1).pow(2).sum(1)  # (windows,): each window's |G_big|²
    age = torch.arange(len(windows) - 1, -1, -1, dtype=torch.float64)

    def ema(beta, per_window):
        weights = (1 - beta) * beta**age
        return float((weights * per_window).sum() / weights.sum())

    def first_ema(per_window, beta=0.99):
        # avg ← per_window[0], then avg ← β·avg + (1 − β)·value: the first keeps β^(n−1)
        weights = (1 - beta) * beta**age
        weights[0] = beta ** (len(windows) - 1)
        return float((weights * per_window).sum())

    per = [two_batch_estimate(float(s), float(g), b, k * b) for s, g in zip(small.mean(1), big)]
    g2 = [p["g_squared"] for p in per]
    tr = [p["trace_sigma"] for p in per]
    n = len(per)
    half, quarter = len(windows) // 2, len(windows) // 4

    def part(windows_kept, micro_kept=slice(None)):
        return ratio(float(small[windows_kept, micro_kept].mean()), float(big[windows_kept].mean()))

    return {
        "full": ratio(float(small.mean()), float(big.mean())),
        # the estimators asked for: every window, plainly or by an EMA with β ≥ 0.99
        "accepted": [ratio(float(small.mean()), float(big.mean()))]
        + [ratio(ema(beta, small.mean(1)), ema(beta, big)) for beta in ACCEPTED_BETAS],
        "partial": {
            **{
                f"an EMA with β = {beta}": ratio(ema(beta, small.mean(1)), ema(beta, big))
                for beta in PARTIAL_BETAS
            },  # fmt: skip
            f"the first {quarter} windows alone": part(slice(None, quarter)),
            f"the first {half} windows alone": part(slice(None, half)),
            f"the last {quarter} windows alone": part(slice(-quarter, None)),
            f"the last {half} windows alone": part(slice(-half, None)),
            f"micro-batches 0-{k // 2 - 1} of each window alone": part(
                slice(None), slice(None, k // 2)
            ),
            "each window's first micro-batch alone": ratio(
                float(small[:, 0].mean()), float(big.mean())
            ),
            "each window's last micro-batch alone": ratio(
                float(small[:, -1].mean()), float(big.mean())
            ),
            # an off-by-one around `.grad is None`: close to the full estimate, but not it
            "every micro-batch of each window but its first": part(slice(None), slice(1, None)),
            "every micro-batch of each window but its last": part(slice(None), slice(None, -1)),
        },
        "mistakes": {
            "mean of per-window ratios": sum(t / g for t, g in zip(tr, g2)) / n,
            **{
                f"an EMA with β = {beta} started at the first window's value": ratio(
                    first_ema(small.mean(1), beta), first_ema(big, beta)
                )
                for beta in (0.99, 0.995, 0.999)
            },
            "|G_big|² as |G|²": (sum(tr) / n) / (sum(g + t / (k * b) for g, t in zip(g2, tr)) / n),
        },
    }
