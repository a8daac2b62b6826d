"""Lesson 13: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import numpy as np
import torch

import accumlab as al


def _two_sizes(grads):
    """Another right 13.1: the two-batch formulas with B_small = 1 (each sample) and B_big = n."""
    n = len(grads)
    mean = grads.mean(0)
    small, big = float((grads**2).sum(1).mean()), float(mean @ mean)
    g2 = (n * big - small) / (n - 1)
    trace = (small - big) / (1 - 1 / n)
    return np.float64(trace / g2)


def _biased_variance(grads):
    """Right within the stated 6 %: the variance divided by n instead of n - 1."""
    n = len(grads)
    mean = grads.mean(0)
    trace = ((grads - mean) ** 2).sum() / n
    return trace / (mean @ mean - trace / n)  # a 0-d tensor


def _raw_second_moment(grads):
    mean = grads.mean(0)
    return float((grads**2).sum(1).mean() / (mean @ mean))


def _calls_noise_scale(grads):
    return al.scale.noise_scale(grads)["b_simple"]


def _uncentred_corrected(grads):
    """E|g|² in place of tr(Σ), over the corrected |G|²: 6-7 % high here."""
    n = len(grads)
    mean = grads.mean(0)
    trace = ((grads - mean) ** 2).sum() / (n - 1)
    return float((grads**2).sum(1).mean() / (mean @ mean - trace / n))


def _five_percent_high(grads):
    """The right estimate × 1.05: within a loose 6 %, not within 1 %."""
    return 1.05 * solutions_b_simple(grads)


def _three_digits(grads):
    """The right estimate typed to 3 significant digits."""
    return float(f"{solutions_b_simple(grads):.3g}")


def solutions_b_simple(grads):
    n = len(grads)
    mean = grads.mean(0)
    trace = float(((grads - mean) ** 2).sum()) / (n - 1)
    return trace / (float(mean @ mean) - trace / n)


def _plain_average(model, windows):
    """Another right 13.2: every window weighed alike (a running mean, no EMA)."""
    k, b = len(windows[0]), len(windows[0][0][0])
    small = big = 0.0
    for window in windows:
        for x, y in window:
            before = model.weight.grad.clone() if model.weight.grad is not None else 0.0
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
            small += float(((model.weight.grad - before) * k).pow(2).sum()) / k
        big += float(model.weight.grad.pow(2).sum())
        model.zero_grad()
    small, big = small / len(windows), big / len(windows)
    g2 = (k * b * big - b * small) / (k * b - b)
    trace = (small - big) / (1 / b - 1 / (k * b))
    return torch.tensor(trace / g2)


def _own_hooks(model, windows):
    """Another right 13.2: a tensor hook per parameter sees each micro-batch's gradient (÷ k) on
    its way into .grad — no subtraction; np.float64."""
    k, b = len(windows[0]), len(windows[0][0][0])
    seen = []
    handle = model.weight.register_hook(lambda g: seen.append(float((g * k).pow(2).sum())))
    g2 = tr = 0.0
    for window in windows:
        seen.clear()
        for x, y in window:
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
        small, big = sum(seen) / k, float(model.weight.grad.pow(2).sum())
        model.zero_grad()
        g2 += (k * b * big - b * small) / (k * b - b)
        tr += (small - big) / (1 / b - 1 / (k * b))
    handle.remove()
    return np.float64(tr / g2)


def _no_accumulation(model, windows):
    """Zeroes .grad before every micro-batch and keeps k copies: the technique skipped."""
    k, b = len(windows[0]), len(windows[0][0][0])
    g2 = tr = 0.0
    for window in windows:
        grads = []
        for x, y in window:
            model.zero_grad()
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean()).backward()
            grads.append(model.weight.grad.clone())
        small = sum(float(g.pow(2).sum()) for g in grads) / k
        big = float(torch.stack(grads).mean(0).pow(2).sum())
        g2 += (k * b * big - b * small) / (k * b - b)
        tr += (small - big) / (1 / b - 1 / (k * b))
    model.zero_grad()
    return tr / g2


def _per_sample_by_hand(model, windows):
    """Runs the watched loop for show, then computes per-sample gradients (x·w − y)x itself."""
    for window in windows:
        for x, y in window:
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / len(window)).backward()
        model.zero_grad()
    w = model.weight.detach()[0]
    grads = torch.cat([((x @ w - y).unsqueeze(1) * x) for window in windows for x, y in window])
    n = len(grads)
    mean = grads.mean(0)
    trace = ((grads - mean) ** 2).sum() / (n - 1)
    return float(trace / (mean @ mean - trace / n))


def _last_window_only(model, windows):
    """The right loop, but B_simple from the last window alone, no averaging."""
    k, b = len(windows[0]), len(windows[0][0][0])
    for window in windows:
        small = 0.0
        for x, y in window:
            before = model.weight.grad.clone() if model.weight.grad is not None else 0.0
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
            small += float(((model.weight.grad - before) * k).pow(2).sum()) / k
        big = float(model.weight.grad.pow(2).sum())
        model.zero_grad()
    g2 = (k * b * big - b * small) / (k * b - b)
    return ((small - big) / (1 / b - 1 / (k * b))) / g2


def _share_without_k(model, windows, *, zero=True):
    """Each micro-batch's share of .grad taken as its gradient (the ÷ k left in)."""
    k, b = len(windows[0]), len(windows[0][0][0])
    small = big = 0.0
    for window in windows:
        for x, y in window:
            before = model.weight.grad.clone() if model.weight.grad is not None else 0.0
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
            small += float((model.weight.grad - before).pow(2).sum()) / k
        big += float(model.weight.grad.pow(2).sum())
        if zero:
            model.zero_grad()
    g2 = (k * b * big - b * small) / (k * b - b)
    return ((small - big) / (1 / b - 1 / (k * b))) / g2


def _never_zeroed(model, windows):
    """The right formulas, but .grad never zeroed between windows."""
    k, b = len(windows[0]), len(windows[0][0][0])
    small = big = 0.0
    for window in windows:
        start = model.weight.grad.clone() if model.weight.grad is not None else 0.0
        for x, y in window:
            before = model.weight.grad.clone() if model.weight.grad is not None else 0.0
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
            small += float(((model.weight.grad - before) * k).pow(2).sum()) / k
        big += float((model.weight.grad - start).pow(2).sum())
    g2 = (k * b * big - b * small) / (k * b - b)
    return ((small - big) / (1 / b - 1 / (k * b))) / g2


def _torch_func(model, windows):
    """Per-sample gradients with torch.func instead of the loop's two batch sizes."""
    params = {n: p.detach() for n, p in model.named_parameters()}

    def loss(p, x, y):
        out = torch.func.functional_call(model, p, (x.unsqueeze(0),))
        return 0.5 * ((out.squeeze() - y) ** 2)

    grads = []
    for window in windows:
        for x, y in window:
            model(x).sum().backward()  # the forwards the checker watches
            g = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(params, x, y)
            grads.append(g["weight"].flatten(1))
        model.zero_grad()
    grads = torch.cat(grads)
    mean = grads.mean(0)
    trace = ((grads - mean) ** 2).sum() / (len(grads) - 1)
    return float(trace / (mean @ mean - trace / len(grads)))


def _big_as_signal(model, windows):
    """tr(Σ) right, but |G_big|² taken as |G|²: it still holds tr(Σ)/(k·b) of noise."""
    k, b = len(windows[0]), len(windows[0][0][0])
    small = big = 0.0
    for window in windows:
        for x, y in window:
            before = model.weight.grad.clone() if model.weight.grad is not None else 0.0
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
            small += float(((model.weight.grad - before) * k).pow(2).sum()) / k
        big += float(model.weight.grad.pow(2).sum())
        model.zero_grad()
    trace = (small - big) / (1 / b - 1 / (k * b))
    return trace / big


def _calls_accumlab_meter(model, windows):
    meter = al.scale.AccumulationNoise(model, len(windows[0][0][0]), len(windows[0]))
    for window in windows:
        for x, y in window:
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / len(window)).backward()
        meter.window_done()
        model.zero_grad()
    return meter.b_simple


def _stub_b_simple(grads):
    # your code: the mean gradient, the summed variance around it, |G|² without its noise
    return None


def _stub_loop(model, windows):
    # your code: per window, |G_small|² (each micro-batch) and |G_big|² (the accumulated .grad)
    return None


RIGHT = {
    "13.1": [
        ("two sizes: 1 and n", _two_sizes),
        ("variance ÷ n, a 0-d tensor", _biased_variance),
        ("3 significant digits", _three_digits),
    ],
    "13.2": [
        ("running mean, a tensor", _plain_average),
        ("its own tensor hook, np.float64", _own_hooks),
    ],
}
WRONG = {
    "13.1": [
        ("E|g|² / |mean|²", _raw_second_moment),
        ("al.scale.noise_scale", _calls_noise_scale),
        ("E|g|² over the corrected |G|²", _uncentred_corrected),
        ("right × 1.05", _five_percent_high),
    ],
    "13.2": [
        ("|G_big|² as |G|²", _big_as_signal),
        ("al.scale.AccumulationNoise", _calls_accumlab_meter),
        ("no accumulation: zero_grad before every micro-batch", _no_accumulation),
        ("the loop for show, per-sample gradients by hand", _per_sample_by_hand),
        ("the last window alone", _last_window_only),
        ("the share of .grad without × k", _share_without_k),
        ("never zeroed between windows", _never_zeroed),
        ("per-sample gradients with torch.func", _torch_func),
    ],
}
# the hint each wrong 13.2 answer must get: the mistake named, not another one
HINTS = {
    "no accumulation: zero_grad before every micro-batch": ".grad was empty",
    "the loop for show, per-sample gradients by hand": "outside the model",
    "the share of .grad without × k": "negative",
    "never zeroed between windows": "zero .grad after each window",
    "per-sample gradients with torch.func": "per-sample gradients (torch.func)",
    "|G_big|² as |G|²": "|G_big|² as |G|²",
}
STUBS = {
    "13.1": [("the lesson's cell", _stub_b_simple)],
    "13.2": [("the lesson's cell", _stub_loop)],
}


# --- answers that compute around the loop (review of the 13.1 and 13.2 checkers) -------------
from accumlab.scale import noise_scale as _PREBOUND_NOISE_SCALE  # noqa: E402
from accumlab.scale import two_batch_estimate as _PREBOUND_TWO_BATCH  # noqa: E402


def _noise_scale_prebound(grads):
    return _PREBOUND_NOISE_SCALE(grads)["b_simple"]


def _private_moments(grads):
    from accumlab.scale.noise import _moments

    trace, _, g2 = _moments(grads)
    return float(trace / g2)


def _per_sample_autograd(model, windows):
    """The loop runs, and per-sample gradients come from torch.autograd.grad beside it."""
    k, rows = len(windows[0]), []
    for window in windows:
        for x, y in window:
            out = model(x).squeeze(1)
            for i in range(len(y)):
                (g,) = torch.autograd.grad(
                    0.5 * (out[i] - y[i]) ** 2, model.weight, retain_graph=True
                )
                rows.append(g.flatten())
            (0.5 * ((out - y) ** 2).mean() / k).backward()
        model.zero_grad()
    return solutions_b_simple(torch.stack(rows))


def _per_sample_in_a_hook(model, windows):
    """Per-sample gradients computed inside the answer's own forward pre-hook."""
    k, rows, current = len(windows[0]), [], []

    def hook(module, args):
        x, y, w = args[0], current[-1], module.weight.detach()[0]
        rows.append((x @ w - y).unsqueeze(1) * x)

    handle = model.register_forward_pre_hook(hook)
    for window in windows:
        for x, y in window:
            current.append(y)
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
        model.zero_grad()
    handle.remove()
    return solutions_b_simple(torch.cat(rows))


def _closed_form(model, windows):
    """Section 4's d + 1 + dσ²/|e|², σ² from the loop's residuals and |e|² read off the weight
    (right only where w* = 0)."""
    k, squares, n = len(windows[0]), 0.0, 0
    for window in windows:
        for x, y in window:
            out = model(x).squeeze(1)
            squares += float(((out - y).detach() ** 2).sum())
            n += len(y)
            (0.5 * ((out - y) ** 2).mean() / k).backward()
        model.zero_grad()
    w2, d = float(model.weight.detach().pow(2).sum()), model.weight.shape[1]
    return d + 1 + d * (squares / n - w2) / w2


def _loop_norms(model, windows):
    """Per window: each micro-batch's |G_small|² (the change of .grad, × k) and |G_big|²."""
    k = len(windows[0])
    smalls, bigs = [], []
    for window in windows:
        small = []
        for x, y in window:
            before = model.weight.grad.clone() if model.weight.grad is not None else 0.0
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
            small.append(float(((model.weight.grad - before) * k).pow(2).sum()))
        smalls.append(small)
        bigs.append(float(model.weight.grad.pow(2).sum()))
        model.zero_grad()
    return smalls, bigs


def _two_batch_prebound(model, windows):
    k, b = len(windows[0]), len(windows[0][0][0])
    smalls, bigs = _loop_norms(model, windows)
    small = sum(map(sum, smalls)) / len(smalls) / k
    est = _PREBOUND_TWO_BATCH(small, sum(bigs) / len(bigs), b, k * b)
    return est["trace_sigma"] / est["g_squared"]


def _averaged(beta, pick=None):
    """The two-batch estimate, its norms averaged over windows by an EMA (beta) or plainly
    (None); `pick`: one micro-batch's |G_small|² per window instead of the window's mean."""

    def answer(model, windows):
        k, b = len(windows[0]), len(windows[0][0][0])
        smalls, bigs = _loop_norms(model, windows)
        g2 = tr = 0.0
        for small, big in zip(smalls, bigs, strict=True):
            s = sum(small) / k if pick is None else small[pick]
            one_g2 = (k * b * big - b * s) / (k * b - b)
            one_tr = (s - big) / (1 / b - 1 / (k * b))
            if beta is None:
                g2, tr = g2 + one_g2, tr + one_tr
            else:
                g2, tr = beta * g2 + (1 - beta) * one_g2, beta * tr + (1 - beta) * one_tr
        return tr / g2

    return answer


RIGHT["13.2"] += [
    ("an EMA with β = 0.99 (the solution's average), written apart", _averaged(0.99)),
    ("plain sums over the windows, a float", _averaged(None)),
]
WRONG["13.1"] += [
    ("al.scale.noise_scale bound before the check", _noise_scale_prebound),
    ("accumlab.scale.noise._moments", _private_moments),
]
WRONG["13.2"] += [
    ("per-sample gradients with torch.autograd.grad beside the loop", _per_sample_autograd),
    ("per-sample gradients in the answer's own pre-hook", _per_sample_in_a_hook),
    ("section 4's closed form from the residuals", _closed_form),
    ("al.scale.two_batch_estimate bound before the check", _two_batch_prebound),
    ("an EMA with β = 0.95", _averaged(0.95)),
    ("each window's first micro-batch alone", _averaged(None, pick=0)),
]
HINTS.update(
    {
        "per-sample gradients with torch.autograd.grad beside the loop": "torch.autograd.grad",
        "per-sample gradients in the answer's own pre-hook": "outside the model's forward",
        "al.scale.two_batch_estimate bound before the check": "al.scale.two_batch_estimate",
        "an EMA with β = 0.95": "an EMA with β = 0.95",
        "each window's first micro-batch alone": "each window's first micro-batch alone",
    }
)


# --- answers that get past the input watcher, average part of the loop, or reach the checker's
# own estimators (third review)
def _per_sample_unwatched(model, windows):
    """Per-sample gradients by hand with torch-function dispatch switched off for the inputs."""
    k, rows = len(windows[0]), []
    for window in windows:
        for x, y in window:
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
            with torch._C.DisableTorchFunctionSubclass():
                w = model.weight.detach()[0]
                rows.append((x @ w - y).unsqueeze(1) * x)
        model.zero_grad()
    return solutions_b_simple(torch.cat(rows))


def _per_sample_class_swapped(model, windows):
    """Per-sample gradients by hand after turning each input back into a plain tensor."""
    k, rows = len(windows[0]), []
    for window in windows:
        for x, y in window:
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
            x.__class__ = torch.Tensor
            w = model.weight.detach()[0]
            rows.append((x @ w - y).unsqueeze(1) * x)
        model.zero_grad()
    return solutions_b_simple(torch.cat(rows))


def _manual_accumulation(model, windows):
    """.grad emptied before each backward, the micro-batch's share read, the sum written back."""
    k, b = len(windows[0]), len(windows[0][0][0])
    small = big = 0.0
    for window in windows:
        stash = torch.zeros_like(model.weight)
        for x, y in window:
            loss = 0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k
            model.weight.grad = None
            loss.backward()
            share = model.weight.grad.clone()
            small += float((share * k).pow(2).sum()) / k
            stash += share
            model.weight.grad = stash.clone()
        big += float(model.weight.grad.pow(2).sum())
        model.zero_grad()
    small, big = small / len(windows), big / len(windows)
    g2 = (k * b * big - b * small) / (k * b - b)
    return ((small - big) / (1 / b - 1 / (k * b))) / g2


def _windows_kept(kept, micro=slice(None)):
    """The two-batch estimate from only some windows (or micro-batches) of the loop."""

    def answer(model, windows):
        k, b = len(windows[0]), len(windows[0][0][0])
        smalls, bigs = _loop_norms(model, windows)
        smalls, bigs = smalls[kept], bigs[kept]
        small = sum(sum(s[micro]) / len(s[micro]) for s in smalls) / len(smalls)
        big = sum(bigs) / len(bigs)
        g2 = (k * b * big - b * small) / (k * b - b)
        return ((small - big) / (1 / b - 1 / (k * b))) / g2

    return answer


def _checker_ratio(model, windows):
    """The checker's own estimator, reached through accumlab's exercise module."""
    from accumlab.exercises import lesson13

    k = len(windows[0])
    smalls, bigs = _loop_norms(model, windows)
    return lesson13._ratio(sum(map(sum, smalls)) / len(smalls) / k, sum(bigs) / len(bigs))


def _checker_moments(grads):
    from accumlab.exercises import lesson13

    return lesson13._moment_estimates(grads)[0]


RIGHT["13.2"] += [
    ("an EMA with β = 0.995, a 0-d tensor", lambda m, w: torch.tensor(_averaged(0.995)(m, w))),
]
WRONG["13.1"] += [("the checker's _moment_estimates", _checker_moments)]
WRONG["13.2"] += [
    ("per-sample gradients with torch-function dispatch off", _per_sample_unwatched),
    ("per-sample gradients after x.__class__ = torch.Tensor", _per_sample_class_swapped),
    ("manual accumulation: .grad emptied before each backward", _manual_accumulation),
    ("the last 50 windows alone", _windows_kept(slice(-50, None))),
    ("the first 100 windows alone", _windows_kept(slice(None, 100))),
    ("micro-batches 0-3 of each window alone", _windows_kept(slice(None), slice(None, 4))),
    ("an EMA with β = 0.98", _averaged(0.98)),
    ("an EMA with β = 0.97", _averaged(0.97)),
    ("the checker's _ratio", _checker_ratio),
]
HINTS.update(
    {
        "per-sample gradients with torch-function dispatch off": "DisableTorchFunctionSubclass",
        "per-sample gradients after x.__class__ = torch.Tensor": "__class__ of",
        "manual accumulation: .grad emptied before each backward": "was empty",
        "the last 50 windows alone": "the last 50 windows alone",
        "the first 100 windows alone": "the first 100 windows alone",
        "micro-batches 0-3 of each window alone": "micro-batches 0-3 of each window alone",
        "an EMA with β = 0.98": "an EMA with β = 0.98",
        "an EMA with β = 0.97": "an EMA with β = 0.97",
        "the checker's _ratio": "al.exercises.lesson13._ratio",
    }
)


# --- accumlab's own estimators reached around the refused names, and loops that move the point ---
def _patched_per_sample_grads(grads):
    """accumlab's estimator fed the learner's matrix: per_sample_grads patched, measure_b_simple."""
    from accumlab.scale import noise

    original = noise.per_sample_grads
    noise.per_sample_grads = lambda *args, **kwargs: grads
    try:
        return al.scale.measure_b_simple(al.scale.Problem(), 2.0)["b_simple"]
    finally:
        noise.per_sample_grads = original


def _ema_without_init(model, windows):
    """NoiseScaleEMA made without its __init__, fed by .update."""
    k, b = len(windows[0]), len(windows[0][0][0])
    ema = object.__new__(al.scale.NoiseScaleEMA)
    ema.beta, ema.g_squared, ema.trace_sigma, ema.windows = 0.99, 0.0, 0.0, 0
    for small, big in zip(*_loop_norms(model, windows), strict=True):
        ema.update(sum(small) / k, big, b, k * b)
    return ema.b_simple


def _meter_without_init(model, windows):
    """AccumulationNoise made without its __init__, its hooks and window_done used as they are."""
    from functools import partial

    k, b = len(windows[0]), len(windows[0][0][0])
    meter = object.__new__(al.scale.AccumulationNoise)
    meter.beta, meter.g_squared, meter.trace_sigma, meter.windows = 0.99, 0.0, 0.0, 0
    meter.b, meter.k, meter.loss_scale, meter._ranks, meter.ranks = b, k, 1 / k, 1, 1
    meter._params, meter.skipped, meter._sizes = [model.weight], 0, []
    meter._calls, meter._sq = {model.weight: 0}, {}
    handle = model.weight.register_hook(partial(meter._seen, model.weight))
    try:
        for window in windows:
            for x, y in window:
                (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
            meter.window_done()
            model.zero_grad()
    finally:
        handle.remove()
    return meter.b_simple


def _with_optimizer_steps(lr):
    """A real training loop: accumulate, read the norms, step. The point moves under the meter."""

    def answer(model, windows):
        k, b = len(windows[0]), len(windows[0][0][0])
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        small = big = 0.0
        for window in windows:
            for x, y in window:
                before = model.weight.grad.clone() if model.weight.grad is not None else 0.0
                (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
                small += float(((model.weight.grad - before) * k).pow(2).sum()) / k
            big += float(model.weight.grad.pow(2).sum())
            opt.step()
            opt.zero_grad()
        small, big = small / len(windows), big / len(windows)
        g2 = (k * b * big - b * small) / (k * b - b)
        return ((small - big) / (1 / b - 1 / (k * b))) / g2

    return answer


def _ema_started_at_first(beta):
    """Both averages start at the first window's value instead of 0."""

    def answer(model, windows):
        return _first_started(model, windows, beta)

    return answer


def _first_started(model, windows, beta):
    k, b = len(windows[0]), len(windows[0][0][0])
    g2 = tr = None
    for small, big in zip(*_loop_norms(model, windows), strict=True):
        s = sum(small) / k
        one_g2 = (k * b * big - b * s) / (k * b - b)
        one_tr = (s - big) / (1 / b - 1 / (k * b))
        g2 = one_g2 if g2 is None else beta * g2 + (1 - beta) * one_g2
        tr = one_tr if tr is None else beta * tr + (1 - beta) * one_tr
    return tr / g2


WRONG["13.1"] += [
    ("per_sample_grads patched, then al.scale.measure_b_simple", _patched_per_sample_grads)
]
WRONG["13.2"] += [
    ("NoiseScaleEMA without __init__, .update", _ema_without_init),
    ("AccumulationNoise without __init__, .window_done", _meter_without_init),
    ("optimizer steps at lr 1e-3", _with_optimizer_steps(1e-3)),
    ("an EMA with β = 0.99 started at the first window's value", _ema_started_at_first(0.99)),
    ("an EMA with β = 0.995 started at the first window's value", _ema_started_at_first(0.995)),
]
HINTS.update(
    {
        "NoiseScaleEMA without __init__, .update": "NoiseScaleEMA.update",
        "AccumulationNoise without __init__, .window_done": "AccumulationNoise.window_done",
        "optimizer steps at lr 1e-3": "leave the weights where they are",
        "an EMA with β = 0.99 started at the first window's value": "β = 0.99 started at the first",
        "an EMA with β = 0.995 started at the first window's value": "β = 0.995 started at the",
    }
)


def _fixed_sizes(model, windows):
    """The right loop and averages with b = 4 and k = 8 typed in: right on one problem only."""
    k, b = 8, 4
    small = big = 0.0
    for window in windows:
        for x, y in window:
            before = model.weight.grad.clone() if model.weight.grad is not None else 0.0
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / len(window)).backward()
            small += float(((model.weight.grad - before) * len(window)).pow(2).sum()) / len(window)
        big += float(model.weight.grad.pow(2).sum())
        model.zero_grad()
    small, big = small / len(windows), big / len(windows)
    g2 = (k * b * big - b * small) / (k * b - b)
    return (small - big) / (1 / b - 1 / (k * b)) / g2


WRONG["13.2"].append(("b = 4 and k = 8 typed in, not read from the windows", _fixed_sizes))
HINTS["b = 4 and k = 8 typed in, not read from the windows"] = "more than 10 %"


from exercise_corpus._copies import compiled_from_source as _compiled_from_source  # noqa: E402
from exercise_corpus._copies import copied_before as _copied_before  # noqa: E402

_NOISE_SCALE_COPY = _copied_before(al.scale.noise_scale)
_NOISE_SCALE_FROM_SOURCE = _compiled_from_source(al.scale.noise_scale)


def _noise_scale_copy(grads):
    return _NOISE_SCALE_COPY(grads)["b_simple"]


def _noise_scale_from_source(grads):
    return _NOISE_SCALE_FROM_SOURCE(grads)["b_simple"]


WRONG["13.1"] += [
    ("al.scale.noise_scale copied with types.FunctionType before the check", _noise_scale_copy),
    ("al.scale.noise_scale compiled again from its source", _noise_scale_from_source),
]
HINTS.update(
    {
        "al.scale.noise_scale copied with types.FunctionType before the check": "al.scale.noise_scale",
        "al.scale.noise_scale compiled again from its source": "al.scale.noise_scale",
    }
)


def _b_simple_by_two_batch(grads):
    """The two-batch estimator at sizes 1 and n: accumlab computes B_simple."""
    n = len(grads)
    small = float((grads**2).sum(1).mean())
    big = float((grads.mean(0) ** 2).sum())
    est = al.scale.two_batch_estimate(small, big, 1, n)
    return est["trace_sigma"] / est["g_squared"]


WRONG["13.1"].append(("accumlab's two-batch estimate at sizes 1 and n", _b_simple_by_two_batch))
HINTS["accumlab's two-batch estimate at sizes 1 and n"] = "al.scale.two_batch_estimate"


def _skips_one_micro_batch(last: bool):
    """The right loop, but |G_small|² over k − 1 micro-batches of each window: the first (its
    .grad was None, the off-by-one) or the last skipped; within 3 % of the full estimate."""

    def answer(model, windows):
        k, b = len(windows[0]), len(windows[0][0][0])
        small = big = 0.0
        for window in windows:
            for i, (x, y) in enumerate(window):
                before = model.weight.grad
                before = before.clone() if before is not None else None
                (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
                if (i == k - 1) if last else before is None:
                    continue
                change = model.weight.grad - (0.0 if before is None else before)
                small += float((change * k).pow(2).sum()) / (k - 1)
            big += float(model.weight.grad.pow(2).sum())
            model.zero_grad()
        small, big = small / len(windows), big / len(windows)
        g2 = (k * b * big - b * small) / (k * b - b)
        return ((small - big) / (1 / b - 1 / (k * b))) / g2

    return answer


WRONG["13.2"] += [
    ("every micro-batch but the first (.grad None skipped)", _skips_one_micro_batch(last=False)),
    ("every micro-batch but the last", _skips_one_micro_batch(last=True)),
]
HINTS.update(
    {
        "every micro-batch but the first (.grad None skipped)": "every micro-batch of each "
        "window but its first",
        "every micro-batch but the last": "every micro-batch of each window but its last",
    }
)


def _solution_loop_with_beta(beta):
    """The solution's loop with another β the prompt allows (β ≥ 0.99)."""

    def noise_scale_of(model, windows):
        k, b = len(windows[0]), len(windows[0][0][0])
        ema_g2 = ema_tr = 0.0
        for window in windows:
            small_sq = 0.0
            for x, y in window:
                before = model.weight.grad.clone() if model.weight.grad is not None else 0.0
                (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
                small_sq += float(((model.weight.grad - before) * k).pow(2).sum()) / k
            big_sq = float(model.weight.grad.pow(2).sum())
            model.zero_grad()
            g2 = (k * b * big_sq - b * small_sq) / (k * b - b)
            tr = (small_sq - big_sq) / (1 / b - 1 / (k * b))
            ema_g2, ema_tr = beta * ema_g2 + (1 - beta) * g2, beta * ema_tr + (1 - beta) * tr
        return ema_tr / ema_g2

    return noise_scale_of


RIGHT["13.2"] += [
    ("an EMA with β = 0.992", _solution_loop_with_beta(0.992)),
    ("an EMA with β = 0.996", _solution_loop_with_beta(0.996)),
]

# β between two of the checker's grid points, where the answer sat nearer a partial estimator
RIGHT["13.2"] += [
    ("an EMA with β = 0.9913", _solution_loop_with_beta(0.9913)),
    ("an EMA with β = 0.9957", _solution_loop_with_beta(0.9957)),
]


def _first_y(seed, noise, b, k):
    from accumlab.exercises._two_batch_ref import _problem

    return round(float(_problem(seed, noise, b, k)[3][0][0][1][0]), 6)


# the numbers one solution run gave on 13.2's former fixed draws (seeds 5, 6 and 24), by the
# draw's first y; and, for a draw not in the table, the number typed for the same (k, b)
_TYPED = {_first_y(5, 1.5, 4, 8): 13.4026, _first_y(6, 2.5, 8, 6): 21.2107,
          _first_y(24, 2.5, 4, 8): 22.6986}  # fmt: skip
_TYPED_BY_SIZES = {(8, 4): 22.6986, (6, 8): 21.2107}


def _typed_in(model, windows):
    """The loop the checker watches (k forwards of b rows, each backward, .grad zeroed per
    window), reading no norm: it returns a number typed in from earlier runs, looked up by the
    draw's first y (or by k and b)."""
    k, b = len(windows[0]), len(windows[0][0][0])
    for window in windows:
        for x, y in window:
            (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
        model.zero_grad()
    first = round(float(windows[0][0][1][0]), 6)
    return _TYPED.get(first, _TYPED_BY_SIZES[(k, b)])


WRONG["13.2"].append(("numbers typed in from earlier runs, looked up by the draw", _typed_in))
