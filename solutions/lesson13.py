"""Solutions to lesson 13's exercises, and one wrong answer each (tests/test_exercises.py)."""


def b_simple(grads):
    n = len(grads)
    mean = grads.mean(dim=0)
    trace = ((grads - mean) ** 2).sum() / (n - 1)  # tr(Σ): every parameter's variance, summed
    g2 = mean @ mean - trace / n  # |G|², minus the noise the mean of n samples still carries
    return float(trace / g2)


def b_simple_naive(grads):
    """tr(Σ)/|mean|²: |mean|² still holds tr(Σ)/n of noise, so this reads B/(1 + B/n)."""
    mean = grads.mean(dim=0)
    trace = ((grads - mean) ** 2).sum() / (len(grads) - 1)
    return float(trace / (mean @ mean))


def noise_scale_of(model, windows):
    """Two batch sizes from the loop itself: each micro-batch's gradient (b samples) and the
    window's accumulated one (k·b), averaged with an EMA of numerator and denominator."""
    k, b = len(windows[0]), len(windows[0][0][0])
    ema_g2 = ema_tr = 0.0
    for window in windows:
        small_sq = 0.0
        for x, y in window:
            before = model.weight.grad.clone() if model.weight.grad is not None else 0.0
            loss = 0.5 * ((model(x).squeeze(1) - y) ** 2).mean()
            (loss / k).backward()
            small_sq += float(((model.weight.grad - before) * k).pow(2).sum()) / k
        big_sq = float(model.weight.grad.pow(2).sum())  # the accumulated mean: batch k·b
        model.zero_grad()
        g2 = (k * b * big_sq - b * small_sq) / (k * b - b)
        tr = (small_sq - big_sq) / (1 / b - 1 / (k * b))
        ema_g2, ema_tr = 0.99 * ema_g2 + 0.01 * g2, 0.99 * ema_tr + 0.01 * tr
    return ema_tr / ema_g2


def mean_of_ratios(model, windows):
    """The right loop and norms, but B_simple taken per window and averaged: biased and noisy."""
    k, b = len(windows[0]), len(windows[0][0][0])
    ratios = []
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
        ratios.append(tr / g2)
    return sum(ratios) / len(ratios)


SOLUTIONS = {"13.1": b_simple, "13.2": noise_scale_of}
WRONG = {"13.1": b_simple_naive, "13.2": mean_of_ratios}
