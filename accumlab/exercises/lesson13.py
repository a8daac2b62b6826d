"""Lesson 13 exercises: the noise scale B_simple from per-sample gradients (bias corrected), and
from an accumulation loop's own two batch sizes."""

from __future__ import annotations

import torch

from . import exercise
from ._answers import Hint, number
from ._calls import Refuse
from ._observe import Observe

SAMPLES = {2.0: 32, 0.5: 128}  # excess loss → samples: n not much larger than B_simple (11, 17)
TOLERANCE_13_1 = 0.01  # of the moment estimator with tr(Σ) ÷ (n − 1) or ÷ n


def _noise_points():
    from ..scale.noise import Problem, per_sample_grads

    problem = Problem()
    gen = torch.Generator().manual_seed(13)
    points = []
    for excess, n in SAMPLES.items():
        x, y = problem.sample(n, gen)
        points.append(per_sample_grads(problem.point(excess, 3), x, y))
    return points


def _moment_estimates(grads) -> list[float]:
    """The moment estimator with either variance convention: tr(Σ) = Σ|g_i − mean|² ÷ (n − 1) or
    ÷ n, |G|² = |mean|² − tr(Σ)/n. At n = 32 the two differ by about 4 %."""
    n = len(grads)
    mean = grads.mean(dim=0)
    spread = float(((grads - mean) ** 2).sum())
    mean_sq = float(mean @ mean)
    return [(spread / d) / (mean_sq - spread / d / n) for d in (n - 1, n)]


@exercise("13.1", 2, "B_simple from per-sample gradients")
def b_simple(answer) -> str | None:
    # answer(grads) -> number, grads of shape (samples, parameters). Compared, on the same matrix,
    # with the bias-corrected moment estimator to 1 % (tr(Σ) ÷ n − 1 or ÷ n both pass); the naive
    # tr(Σ)/|mean|² (off by B_simple/n ≈ 12-30 % here) and E|g|² in place of tr(Σ) (6-7 %) do not.
    from ..scale import noise

    if not callable(answer):
        return "answer with a function b_simple_of(grads) returning a number"
    for grads in _noise_points():
        expected = _moment_estimates(grads)
        with Refuse("al.scale.noise_scale", "al.scale.estimator_bias"):
            got = number(answer(grads.clone()))
        if any(abs(got / e - 1) <= TOLERANCE_13_1 for e in expected):
            continue
        if abs(got / noise.noise_scale(grads)["b_naive"] - 1) <= TOLERANCE_13_1:
            return (
                f"got {got:.3g}: that is tr(Σ)/|mean|². With n = {len(grads)} samples the mean "
                "is itself noisy: |mean|² overestimates |G|² by tr(Σ)/n — subtract it"
            )
        return (
            f"got {got:.3g}, more than 1 % from the moment estimator for these {len(grads)} "
            "samples: tr(Σ) is the summed variance of each parameter's gradient around the mean "
            "(÷ n − 1 or ÷ n); |G|² the squared norm of the mean, less tr(Σ)/n"
        )
    return None


# the two-batch exercise: windows of k micro-batches of b samples at a fixed point of excess loss,
# on a problem whose noise the learner is not told (so B_simple cannot be taken from the closed
# form), on two problems: a lucky window or seed cannot pass alone
B, K, WINDOWS, EXCESS, NOISE = 4, 8, 200, 2.0, 1.5
SEEDS = (5, 6)
TOLERANCE_13_2 = 0.10  # the EMA (β = 0.99) over 40 seeds here: −7 % to +8 %
SHAPE_ONLY = {"__len__", "size", "dim", "numel", "__repr__", "__str__", "__format__"}
ATTRIBUTES = {"shape", "dtype", "device", "ndim", "requires_grad", "is_leaf", "grad_fn", "layout"}
KEEP_WATCHING = {"to", "double", "float", "clone", "detach", "contiguous", "cpu"}


class _Inputs(torch.Tensor):
    """A micro-batch's x that notes every computation made with it outside the model's forward."""

    watch: dict = {"inside": 0, "outside": []}

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name == "__get__":  # an attribute: x.shape is a question, x.T a computation
            name = getattr(getattr(func, "__self__", None), "__name__", name)
        allowed = name in SHAPE_ONLY or name in ATTRIBUTES or name in KEEP_WATCHING
        if not cls.watch["inside"] and not allowed:
            cls.watch["outside"].append(name)
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        return out.as_subclass(cls) if name in KEEP_WATCHING else out


def _mistakes(seed: int) -> dict:
    """What two common mistakes return on this problem, from per-window |G|² and tr(Σ)."""
    from ..scale import two_batch as tb
    from ..scale.noise import Problem
    from ..scale.two_batch import two_batch_estimate

    problem = Problem(noise=NOISE)
    w = problem.point(EXCESS, seed)
    g2, tr = [], []
    for window in tb.micro_batch_windows(problem, B, K, WINDOWS, seed):
        micro = torch.stack([((x @ w - y).unsqueeze(1) * x).mean(0) for x, y in window])
        small, big = float((micro**2).sum(1).mean()), float(micro.mean(0).pow(2).sum())
        est = two_batch_estimate(small, big, B, K * B)
        g2.append(est["g_squared"])
        tr.append(est["trace_sigma"])
    n = len(g2)
    return {
        "mean of per-window ratios": sum(t / g for t, g in zip(tr, g2)) / n,
        "|G_big|² as |G|²": (sum(tr) / n) / (sum(g + t / (K * B) for g, t in zip(g2, tr)) / n),
    }


def _accumulated(grad_states: list) -> str | None:
    """The hint when .grad did not accumulate within windows and start empty at each window."""
    starts = grad_states[::K]
    inside = [s for i, s in enumerate(grad_states) if i % K]
    if not all(inside):
        return (
            f".grad was empty (None or zero) at {inside.count(False)} of the {len(inside)} "
            "micro-batches after each window's first: accumulation lets .grad sum the window's k "
            "backwards (read each micro-batch's share as the change of .grad), zeroing only "
            "between windows"
        )
    if any(starts[1:]):
        return (
            f".grad still held gradients when {sum(starts[1:])} of the windows began: zero .grad "
            "after each window, as an accumulation loop does after its optimizer step"
        )
    return None


def _one_problem(answer, seed: int) -> tuple[float, float]:
    from ..scale import two_batch as tb
    from ..scale.noise import Problem

    problem = Problem(noise=NOISE)
    model = tb.linear_model(problem, EXCESS, seed)
    windows = [[(x.as_subclass(_Inputs), y) for x, y in window]
               for window in tb.micro_batch_windows(problem, B, K, WINDOWS, seed)]  # fmt: skip
    watch = _Inputs.watch = {"inside": 0, "outside": []}
    states: list = []

    def entering(module, args):
        g = module.weight.grad
        states.append(g is not None and bool(g.any()))
        watch["inside"] += 1

    def leaving(module, args, out):
        watch["inside"] -= 1

    names = [f"al.scale.{n}" for n in
             ("two_batch_estimate", "NoiseScaleEMA", "AccumulationNoise", "two_batch_noise")]  # fmt: skip
    handles = [model.register_forward_pre_hook(entering), model.register_forward_hook(leaving)]
    try:
        with Observe(model) as seen, Refuse(*names):
            got = number(answer(model, windows))
    except RuntimeError as err:
        if "saved tensor hooks" not in str(err):
            raise
        raise Hint(
            "your answer computed per-sample gradients (torch.func); this exercise reads "
            "only the two batch sizes an accumulation loop already has"
        ) from None
    finally:
        for h in handles:
            h.remove()
    if len(seen.rows) != K * WINDOWS or set(seen.rows) != {B} or seen.backwards != K * WINDOWS:
        raise Hint(
            f"your answer ran {seen.forwards_phrase()} and {seen.backwards_phrase()}; the loop runs "
            f"k = {K} forwards of b = {B} rows per window, each with its backward, {WINDOWS} windows"
        )
    if watch["outside"]:
        used = ", ".join(sorted(set(watch["outside"])))
        raise Hint(
            f"your answer computed with the micro-batches' inputs outside the model ({used}): "
            "the loop only feeds each x to the model, and reads |G_small|² and |G_big|² from "
            ".grad — no per-sample gradients by hand"
        )
    hint = _accumulated(states)
    if hint:
        raise Hint(hint)
    return got, problem.b_simple(EXCESS)


@exercise("13.2", 3, "B_simple from your own accumulation loop")
def two_batch(answer) -> str | None:
    # answer(model, windows) -> number: accumulate each window (loss / k per micro-batch, the loss
    # ½ mean (model(x) − y)²), read |G_small|² and |G_big|², and return B_simple from averages over
    # the windows. Observed, on two problems: k forwards of b rows per window, each with its
    # backward; .grad summing within a window and empty when the next begins; no computation with
    # the inputs outside the model; no call to accumlab's estimator. Compared with the exact
    # B_simple of each problem to 10 %.
    if not callable(answer):
        return "answer with a function noise_scale_of(model, windows) returning a number"
    for seed in SEEDS:
        got, exact = _one_problem(answer, seed)
        if abs(got / exact - 1) <= TOLERANCE_13_2:
            continue
        for mistake, value in _mistakes(seed).items():  # the hints never state the exact value
            if abs(got / value - 1) <= 0.02:
                why = {
                    "mean of per-window ratios": "a ratio per window, averaged, is biased and "
                    "noisy: average |G|² and tr(Σ) over the windows first, then divide",
                    "|G_big|² as |G|²": "|G_big|² still carries tr(Σ)/(k·b) of noise: |G|² "
                    "combines both batch sizes",
                }[mistake]
                return f"got {got:.3g}, which is what {mistake} gives: {why}"
        if got <= 0:
            return (
                f"got {got:.3g}: tr(Σ) or |G|² came out negative — is |G_small|² each "
                "micro-batch's own gradient, the change of .grad during its backward times k "
                "(its loss was divided by k)?"
            )
        return (
            f"got {got:.3g}, more than 10 % from B_simple: check |G_small|² (each micro-batch's "
            "change of .grad, times k, squared, averaged over the window), |G_big|² (the squared "
            ".grad at the window's end, divided by nothing: loss / k already made it the mean), "
            "both formulas, and the average over windows before the ratio"
        )
    return None
