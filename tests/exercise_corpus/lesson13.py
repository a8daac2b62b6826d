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
    "13.1": [("two sizes: 1 and n", _two_sizes), ("variance ÷ n, a 0-d tensor", _biased_variance)],
    "13.2": [("running mean, a tensor", _plain_average)],
}
WRONG = {
    "13.1": [("E|g|² / |mean|²", _raw_second_moment), ("al.scale.noise_scale", _calls_noise_scale)],
    "13.2": [
        ("|G_big|² as |G|²", _big_as_signal),
        ("al.scale.AccumulationNoise", _calls_accumlab_meter),
    ],
}
STUBS = {
    "13.1": [("the lesson's cell", _stub_b_simple)],
    "13.2": [("the lesson's cell", _stub_loop)],
}
