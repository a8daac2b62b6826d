"""Lesson 13 exercises: the noise scale B_simple from per-sample gradients (bias corrected), and
from an accumulation loop's own two batch sizes."""

from __future__ import annotations

import torch

from . import exercise
from ._answers import Hint, number
from ._calls import Refuse
from ._draws import pool_seed
from ._inputs_watch import _accumulated, _Inputs, _Watched
from ._observe import Observe
from ._two_batch_ref import (  # the checker's estimators: refused by name below
    INSIDE,
    LAST_PROBLEM,
    LAST_SEEDS,
    PARTIAL,
    PROBLEMS,
    TOLERANCE_13_2,
    WINDOWS,
    _problem,
    _ratio,  # noqa: F401  (refused by name: al.exercises.lesson13._ratio)
    _same_draws,
)

# the checkers' own estimators, refused too: a call from the answer reaches them directly
PRIVATE_13_1 = ("al.exercises.lesson13._moment_estimates", "al.exercises.lesson13._noise_points")
PRIVATE_13_2 = ("al.exercises.lesson13._ratio", "al.exercises.lesson13._same_draws",
                "al.exercises.lesson13._problem")  # fmt: skip
SAMPLES = {2.0: 32, 0.5: 128}  # excess loss → samples: n not much larger than B_simple (11, 17)
TOLERANCE_13_1 = 0.01  # of the moment estimator with tr(Σ) ÷ (n − 1) or ÷ n
# the sample draws 13.1 checks on, one drawn afresh per check: on each, every right answer of the
# corpus lands within 1 % and every wrong one more than 2 % away (on 15 % of seeds in 0-3000 a
# wrong one, E|g|² for tr(Σ), lands within 2 %); tests/ runs the corpus on each
NOISE_SEEDS = (
    0,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    12,
    13,
    15,
    16,
    17,
    18,
    19,
    20,
    21,
    22,
    23,
    24,
    25,
    26,
    27,
    28,
    29,
    30,
    31,
    32,
    33,
    34,
    35,
    36,
    37,
    38,
    39,
    41,
    43,
    44,
)


def _noise_points(seed: int):
    from ..scale.noise import Problem, per_sample_grads

    problem = Problem()
    gen = torch.Generator().manual_seed(seed)
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
    for grads in _noise_points(pool_seed(NOISE_SEEDS)):
        with Refuse("al.scale.noise_scale", "al.scale.estimator_bias", "al.scale.noise._moments",
                    "al.scale.measure_b_simple", "al.scale.two_batch_estimate",
                    "al.scale.NoiseScaleEMA", *PRIVATE_13_1):  # fmt: skip
            got = number(answer(grads.clone()))
        expected = _moment_estimates(grads)  # after the answer: no frame it runs under holds it
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


def _one_problem(answer, seed: int, noise: float, b: int, k: int) -> tuple[float, dict]:
    from torch import nn

    problem, e, shift, plain = _problem(seed, noise, b, k)
    model = nn.Linear(problem.features, 1, bias=False, dtype=torch.float64)
    with torch.no_grad():
        model.weight.copy_((e + shift).unsqueeze(0))
    windows = [[(x.as_subclass(_Inputs), y) for x, y in window] for window in plain]
    watch = _Inputs.watch = {"inside": 0, "outside": []}
    states: list = []

    def entering(module, args):
        g = module.weight.grad
        states.append(g is not None and bool(g.any()))

    def arriving(grad):
        # at backward, before this micro-batch's gradient is added: an answer that empties .grad
        # after the forward and writes the sum back itself is not accumulation
        g = model.weight.grad
        at_backward.append(g is not None and bool(g.any()))

    at_backward: list = []
    own_forward = model.forward

    def forward(*args, **kwargs):
        # "inside the model" is its own forward only: a hook the answer adds runs outside it
        watch["inside"] += 1
        try:
            return own_forward(*args, **kwargs)
        finally:
            watch["inside"] -= 1

    model.forward = forward
    # the classes by their __init__, and the methods that do the work, for an instance made
    # without it (object.__new__)
    names = [f"al.scale.{n}" for n in
             ("two_batch_estimate", "NoiseScaleEMA", "AccumulationNoise", "two_batch_noise",
              "NoiseScaleEMA.update", "AccumulationNoise.window_done")]  # fmt: skip
    handles = [model.register_forward_pre_hook(entering), model.weight.register_hook(arriving)]
    hidden = [(name, getattr(torch._C, name)) for name in
              ("DisableTorchFunctionSubclass", "DisableTorchFunction")]  # fmt: skip
    try:
        for name, original in hidden:
            setattr(torch._C, name, _Watched(original, name))
        with Observe(model, inputs=True) as seen, Refuse(*names, *PRIVATE_13_2):
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
        for name, original in hidden:
            setattr(torch._C, name, original)
        vars(model).pop("forward", None)
    moved = float((model.weight.detach() - (e + shift)).abs().max())
    if moved > 0:
        raise Hint(
            f"the model's weights moved by up to {moved:.2g} during your loop (an optimizer "
            "step?): the noise scale is read at one point, so leave the weights where they are — "
            "accumulate, read the norms, zero .grad, and take no step"
        )
    if len(seen.rows) != k * WINDOWS or set(seen.rows) != {b} or seen.backwards != k * WINDOWS:
        raise Hint(
            f"your answer ran {seen.forwards_phrase()} and {seen.backwards_phrase()}; the loop runs "
            f"k = {k} forwards of b = {b} rows per window, each with its backward, {WINDOWS} windows"
        )
    if seen.grad_only:
        raise Hint(
            f"your answer called torch.autograd.grad {seen.grad_only} times besides its backward "
            "passes: the loop reads |G_small|² and |G_big|² from .grad alone — each "
            "micro-batch's change of .grad, and .grad at the window's end, with no extra pass"
        )
    fed = seen.fed([x for window in plain for x, _ in window])
    if fed:
        raise Hint(f"{fed}: the loop feeds each micro-batch's x to the model as it comes")
    swapped = sum(type(x) is not _Inputs for window in windows for x, _ in window)
    if swapped:
        watch["outside"].append(f"__class__ of {swapped} inputs")
    if watch["outside"]:
        used = ", ".join(sorted(set(watch["outside"])))
        raise Hint(
            f"your answer computed with the micro-batches' inputs outside the model's forward "
            f"({used}), in its own code or in a hook: the loop only feeds each x to the model, "
            "and reads |G_small|² and |G_big|² from .grad — no per-sample gradients by hand"
        )
    hint = _accumulated(states, k) or _accumulated(at_backward, k)
    if hint:
        raise Hint(hint)
    return got, _same_draws(e, shift, plain)


# three problems of 200 windows each: about 10 s of the checker's own work on a quiet 2-core CPU
@exercise("13.2", 3, "B_simple from your own accumulation loop", time_limit=90.0)
def two_batch(answer) -> str | None:
    # answer(model, windows) -> number: accumulate each window (loss / k per micro-batch, the loss
    # ½ mean (model(x) − y)²), read |G_small|² and |G_big|², and return B_simple from averages over
    # the windows. Observed, on three problems: k forwards of b rows per window, each with its
    # backward and the micro-batch's own rows; no torch.autograd.grad; .grad summing within a
    # window and empty when the next begins; no computation with the inputs outside the model's
    # forward (hooks included); no call to accumlab's estimator. Compared with the estimator on
    # the same draws to 10 % (TOLERANCE_13_2); partial estimators are refused by name.
    if not callable(answer):
        return "answer with a function noise_scale_of(model, windows) returning a number"
    # two (b, k), which an answer reads from `windows`, and two noises at the same (b, k); the
    # last problem's draws are one of LAST_SEEDS, picked afresh, so a table of numbers typed in
    # from earlier runs does not fit it; the order is fixed, so each wrong answer meets the
    # problem that names its mistake first
    for seed, noise, b, k in (*PROBLEMS, (pool_seed(LAST_SEEDS), *LAST_PROBLEM)):
        got, ref = _one_problem(answer, seed, noise, b, k)
        full = ref["full"]
        # the partial estimator nearest the answer, if the answer is it and not the full one
        what, value = min(ref["partial"].items(), key=lambda item: abs(got / item[1] - 1))
        low, high = min(ref["accepted"]), max(ref["accepted"])
        outside = not low * (1 - INSIDE) <= got <= high * (1 + INSIDE)
        if abs(got / value - 1) <= PARTIAL < abs(value / full - 1) and outside:
            # said as a match of numbers: another computation (a median, say) may land there too
            return (
                f"got {got:.3g}, which matches what {what} gives on these draws (to "
                f"{PARTIAL:.1%}; that estimator is not the average over all {WINDOWS} windows "
                f"and all {k} micro-batches of each, so whether it lands near that average "
                "depends on the draw): average every micro-batch's |G_small|² and every window's "
                "|G_big|² (a plain mean, or an EMA with β ≥ 0.99)"
            )
        if abs(got / full - 1) <= TOLERANCE_13_2:
            continue
        # the nearest mistake first; the hints never state the right value
        for mistake, value in sorted(ref["mistakes"].items(), key=lambda m: abs(got / m[1] - 1)):
            if abs(got / value - 1) <= 0.02:
                if "started at the first" in mistake:  # avg ← first value, then β·avg + (1 − β)·x
                    return (
                        f"got {got:.3g}, which is what {mistake} gives: that window keeps the "
                        f"weight β^{WINDOWS - 1}, far more than any other; start both averages at "
                        "0 (the start-up factor cancels in the ratio) or take plain means"
                    )
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
            f"got {got:.3g}, more than 10 % from the two-batch estimate over all {WINDOWS} windows "
            "on these same draws: check |G_small|² (each micro-batch's change of .grad, times k, "
            "squared, averaged over the window), |G_big|² (the squared .grad at the window's end, "
            "divided by nothing: loss / k already made it the mean), both formulas, the "
            "average over windows before the ratio, and b and k as this problem's windows give "
            "them (k = len(window), b = rows of x: the problems differ)"
        )
    return None
