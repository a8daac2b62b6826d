"""When does a bigger batch stop paying? Steps and samples to reach a target loss, swept over the
effective batch size B, each at its best learning rate (lesson 13).

Accumulating k micro-batches of b samples gives the optimizer the gradient of one batch of
B = k·b (lesson 02), so what an optimizer step achieves depends on B only. Every run here is plain
SGD on `noise.Problem`; many runs (learning rates × seeds) advance together as one batched
tensor computation. McCandlish et al. (2018) model the result as S = S_min (1 + B_crit / B) steps
and E = B·S = E_min (1 + B / B_crit) samples, with B_crit = E_min / S_min close to B_noise; `fit`
finds S_min and E_min from the sweep.
"""

from __future__ import annotations

import math

import torch

from .. import _validate
from .._threads import one_thread
from .._validate import MAX_STEPS, positive_float, positive_int
from .noise import Problem, check_problem

BATCH_SIZES = tuple(2**i for i in range(11))  # 1 … 1024
LEARNING_RATES = tuple(2 ** (-i / 2) for i in range(13))  # 1 … 1/64, half-octave steps


def _check_list(name: str, values, check) -> list:
    return [check(f"{name}[{i}]", v) for i, v in enumerate(_validate.sequence(name, values))]


def batch_gradients(e: torch.Tensor, x: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Mean gradient of ½ (x·w − y)² over each run's batch: e (runs, d), x (runs, B, d), noise
    (runs, B) with y − x·w* = noise. The same as averaging `per_sample_grads` (a test checks)."""
    runs, d = _validate.tensor("e", e, dim=2, floating=True).shape
    _validate.tensor("x", x, dim=3, floating=True)
    _validate.tensor("noise", noise, dim=2, floating=True)
    if x.shape[0] != runs or x.shape[2] != d or noise.shape != x.shape[:2]:
        raise ValueError(
            f"x must have shape (runs, B, d) and noise (runs, B) for e of shape ({runs}, {d}), got "
            f"x of shape {tuple(x.shape)} and noise of shape {tuple(noise.shape)}"
        )
    residual = torch.einsum("rbd,rd->rb", x, e) - noise
    return torch.einsum("rb,rbd->rd", residual, x) / x.shape[1]


def _steps_for_batch(problem, batch, lrs, seeds, start, target, max_steps, gen) -> tuple:
    runs = len(lrs) * seeds
    lr = torch.tensor(lrs, dtype=torch.float64).repeat_interleave(seeds).unsqueeze(1)
    e = problem.point(start).expand(runs, -1).clone()
    steps = torch.full((runs,), math.inf, dtype=torch.float64)
    for t in range(1, max_steps + 1):
        x = torch.randn(runs, batch, problem.features, generator=gen, dtype=torch.float64)
        noise = problem.noise * torch.randn(runs, batch, generator=gen, dtype=torch.float64)
        # the batch-mean gradient: what k accumulated micro-batches of B / k samples also give
        e = e - lr * batch_gradients(e, x, noise)
        reached = (0.5 * (e * e).sum(dim=1) <= target) & steps.isinf()
        steps[reached] = t
        per_lr = steps.view(len(lrs), seeds)
        done = ~per_lr.isinf().any(dim=1)
        if done.any():
            best = float(per_lr[done].mean(dim=1).min())
            # an unfinished learning rate averages at least (finished steps + (t+1) · rest) / seeds
            bound = torch.where(per_lr.isinf(), float(t + 1), per_lr).mean(dim=1)
            if bool((bound[~done] >= best).all()):
                break
    per_lr = steps.view(len(lrs), seeds)
    means = torch.where(per_lr.isinf().any(dim=1), math.inf, per_lr.mean(dim=1))
    i = int(means.argmin())
    return float(means[i]), lrs[i]


@one_thread()
def batch_size_sweep(
    problem: Problem | None = None,
    batch_sizes=BATCH_SIZES,
    *,
    learning_rates=LEARNING_RATES,
    start_excess: float = 2.0,
    target_excess: float = 0.05,
    seeds: int = 16,
    max_samples: int = 1 << 14,
    seed: int = 0,
) -> dict:
    """Mean steps (over `seeds` runs) for SGD to bring the excess loss from `start_excess` down to
    `target_excess`, at each batch size's best learning rate; samples = B × steps. Lesson 13.

    A batch size whose every learning rate needs more than `max_samples` samples gets inf.
    """
    problem = Problem() if problem is None else check_problem(problem)
    batch_sizes = _check_list("batch_sizes", batch_sizes, positive_int)
    lrs = _check_list("learning_rates", learning_rates, positive_float)
    start_excess = positive_float("start_excess", start_excess)
    target_excess = positive_float("target_excess", target_excess)
    if target_excess >= start_excess:
        raise ValueError(
            f"target_excess must be below start_excess={start_excess}, got {target_excess}"
        )
    seeds = positive_int("seeds", seeds)
    max_samples = positive_int("max_samples", max_samples)
    seed = _validate.seed("seed", seed)
    # every batch size runs len(learning_rates) × seeds runs at once, for up to max_samples / B steps
    _validate.fits_in_memory(
        f"batch_sizes up to {max(batch_sizes)} × {len(lrs)} learning_rates × seeds={seeds} runs "
        f"of {problem.features} features",
        8 * 2 * max(batch_sizes) * len(lrs) * seeds * problem.features,
    )
    if max_samples // min(batch_sizes) > MAX_STEPS:
        raise ValueError(
            f"max_samples={max_samples} allows {max_samples // min(batch_sizes):,} steps at batch "
            f"size {min(batch_sizes)}; at most {MAX_STEPS:,} (a step of Python work each)"
        )
    gen = torch.Generator().manual_seed(seed)
    steps, best_lr = [], []
    for b in batch_sizes:
        s, lr = _steps_for_batch(
            problem, b, lrs, seeds, start_excess, target_excess, max(1, max_samples // b), gen
        )
        steps.append(s)
        best_lr.append(lr)
    if not any(math.isfinite(s) for s in steps):  # nothing to plot or fit: say why, once
        raise ValueError(
            f"max_samples={max_samples} is too few: no batch size in {batch_sizes} brought the "
            f"excess loss from {start_excess:g} to {target_excess:g} at any learning rate"
        )
    return {
        "batch_sizes": batch_sizes,
        "steps": steps,
        "samples": [b * s for b, s in zip(batch_sizes, steps)],
        "best_lr": best_lr,
        "start_excess": start_excess,
        "target_excess": target_excess,
        "seeds": seeds,
    }


def fit(batch_sizes, steps) -> dict:
    """Least-squares S(B) = S_min + E_min / B (relative errors), and B_crit = E_min / S_min.
    The model needs S_min > 0 and E_min > 0 (steps that fall, then flatten, as B grows): data
    outside that domain, such as steps that rise with B, is refused with the fitted values."""
    batch_sizes = _validate.positive_ints("batch_sizes", batch_sizes)
    steps = _validate.sequence("steps", steps)
    _validate.same_length(batch_sizes=batch_sizes, steps=steps)
    for i, s in enumerate(steps):  # inf: a batch size that never reached the target (left out)
        if s != float("inf"):
            positive_float(f"steps[{i}]", s)
    pairs = [(b, s) for b, s in zip(batch_sizes, steps) if math.isfinite(s)]
    if len(pairs) < 2:
        raise ValueError(f"steps must hold at least two finite step counts, got {list(steps)!r}")
    b = torch.tensor([p[0] for p in pairs], dtype=torch.float64)
    s = torch.tensor([p[1] for p in pairs], dtype=torch.float64)
    design = torch.stack([torch.ones_like(b), 1 / b], dim=1) / s.unsqueeze(1)
    s_min, e_min = torch.linalg.lstsq(design, torch.ones_like(s).unsqueeze(1)).solution.squeeze(1)
    s_min, e_min = float(s_min), float(e_min)
    _validate.fitted_in_domain(
        "S(B) = S_min + E_min / B",
        {"S_min": s_min, "E_min": e_min},
        ("S_min", "E_min"),
        f"steps {[p[1] for p in pairs]} at batch sizes {[p[0] for p in pairs]} do not fall "
        "towards a floor as B grows, so the model does not describe them",
    )
    return {"s_min": s_min, "e_min": e_min, "b_crit": e_min / s_min}


def tradeoff_curve(s_min: float, e_min: float, batch_sizes) -> dict:
    """The model's steps S_min (1 + B_crit/B) and samples E_min (1 + B/B_crit) at `batch_sizes`."""
    s_min = positive_float("s_min", s_min)
    e_min = positive_float("e_min", e_min)
    batch_sizes = _validate.positive_ints("batch_sizes", batch_sizes)
    b_crit = e_min / s_min
    if not (math.isfinite(b_crit) and b_crit > 0):  # e.g. e_min=1e-300 over s_min=1e300 → 0.0
        raise ValueError(
            f"e_min / s_min must be a positive finite B_crit, got e_min={e_min!r} / "
            f"s_min={s_min!r} = {b_crit!r}"
        )
    out = {
        "batch_sizes": list(batch_sizes),
        "steps": [s_min * (1 + b_crit / b) for b in batch_sizes],
        "samples": [e_min * (1 + b / b_crit) for b in batch_sizes],
    }
    if not all(math.isfinite(v) for v in out["steps"] + out["samples"]):
        raise ValueError(
            f"s_min={s_min!r} and e_min={e_min!r} overflow the curve at batch sizes "
            f"{batch_sizes}: choose values a sweep can produce"
        )
    return out
