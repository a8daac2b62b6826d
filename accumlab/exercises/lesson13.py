"""Lesson 13 exercises: the noise scale B_simple from per-sample gradients (bias corrected), and
from an accumulation loop's own two batch sizes."""

from __future__ import annotations

import torch

from . import exercise
from ._answers import number
from ._calls import Refuse
from ._observe import Observe

SAMPLES = {2.0: 32, 0.5: 128}  # excess loss → samples: n not much larger than B_simple (11, 17)


def _noise_points():
    from ..scale.noise import Problem, per_sample_grads

    problem = Problem()
    gen = torch.Generator().manual_seed(13)
    points = []
    for excess, n in SAMPLES.items():
        x, y = problem.sample(n, gen)
        points.append(per_sample_grads(problem.point(excess, 3), x, y))
    return points


@exercise("13.1", 2, "B_simple from per-sample gradients")
def b_simple(answer) -> str | None:
    # answer(grads) -> number, grads of shape (samples, parameters). Compared, on the same matrix,
    # with the bias-corrected estimate, to 6 %: the n − 1 or n variance both pass, the naive
    # tr(Σ)/|mean|² (off by B_simple/n ≈ 13-35 % here) does not.
    from ..scale import noise

    if not callable(answer):
        return "answer with a function b_simple(grads) returning a number"
    for grads in _noise_points():
        expected = noise.noise_scale(grads)
        with Refuse("al.scale.noise_scale", "al.scale.estimator_bias"):
            got = number(answer(grads.clone()))
        if abs(got / expected["b_simple"] - 1) <= 0.06:
            continue
        if abs(got / expected["b_naive"] - 1) <= 0.06:
            return (
                f"got {got:.3g}: that is tr(Σ)/|mean|². With n = {len(grads)} samples the mean "
                "is itself noisy: |mean|² overestimates |G|² by tr(Σ)/n — subtract it"
            )
        return (
            f"got {got:.3g}, more than 6 % from B_simple for these {len(grads)} samples: tr(Σ) is "
            "the summed variance of each parameter's gradient around the mean; |G|² the squared "
            "norm of the mean, less its own noise"
        )
    return None


# the two-batch exercise: windows of k micro-batches of b samples at a fixed point of excess loss,
# on a problem whose noise the learner is not told (so B_simple cannot be taken from the closed form)
B, K, WINDOWS, EXCESS, SEED, NOISE = 4, 8, 200, 2.0, 5, 1.5


@exercise("13.2", 3, "B_simple from your own accumulation loop")
def two_batch(answer) -> str | None:
    # answer(model, windows) -> number: accumulate each window (loss / k per micro-batch, the loss
    # ½ mean (model(x) − y)²), read |G_small|² and |G_big|², and return B_simple from averages over
    # the windows. Observed: k forwards of b rows per window on the model (no per-sample
    # gradients), and no call to accumlab's estimator. Compared with the exact B_simple to 10 %
    # (the EMA estimate's spread over 30 seeds at this b, k and window count: −7 % to +8 %).
    from ..scale import two_batch as tb
    from ..scale.noise import Problem

    if not callable(answer):
        return "answer with a function noise_scale_of(model, windows) returning a number"
    problem = Problem(noise=NOISE)
    model = tb.linear_model(problem, EXCESS, SEED)
    windows = tb.micro_batch_windows(problem, B, K, WINDOWS, SEED)
    names = [
        f"al.scale.{n}"
        for n in ("two_batch_estimate", "NoiseScaleEMA", "AccumulationNoise", "two_batch_noise")
    ]
    with Observe(model) as seen, Refuse(*names):
        got = number(answer(model, windows))
    if len(seen.rows) != K * WINDOWS or set(seen.rows) != {B} or seen.backwards != K * WINDOWS:
        return (
            f"your answer ran {seen.forwards_phrase()} and {seen.backwards_phrase()}; the loop runs "
            f"k = {K} forwards of b = {B} rows per window, each with its backward, {WINDOWS} windows"
        )
    exact = problem.b_simple(EXCESS)
    if abs(got / exact - 1) <= 0.10:
        return None
    if got < exact:  # the hints never state the exact value: it would become the answer
        return (
            f"got {got:.3g}: too small — is |G_big|² used as |G|²? It still carries tr(Σ)/(k·b) "
            "of noise"
        )
    return (
        f"got {got:.3g}: too large — average |G|² and tr(Σ) over the windows first, then divide "
        "(a mean of per-window ratios is biased and noisy)"
    )
