"""Solutions to lesson 12's exercises, and one wrong answer each (tests/test_exercises.py)."""

import torch


def b_simple(grads):
    n = len(grads)
    mean = grads.mean(dim=0)
    trace = ((grads - mean) ** 2).sum() / (n - 1)  # tr(Σ): every parameter's variance, summed
    g2 = mean @ mean - trace / n  # |G|², minus the noise the mean of n samples still carries
    return float(trace / g2)


def b_simple_raw_second_moment(grads):
    """Forgets to subtract the mean: E|g|² / |G|² = B_simple + 1 (and worse, unscaled)."""
    mean = grads.mean(dim=0)
    return float((grads**2).sum(dim=1).mean() / (mean @ mean))


def accumulate_fp32(model, micro_batches):
    k = len(micro_batches)
    main = {n: torch.zeros_like(p, dtype=torch.float32) for n, p in model.named_parameters()}
    names = {p: n for n, p in model.named_parameters()}

    def add_and_free(param):
        main[names[param]].add_(param.grad)  # rounded to float32 on each add
        param.grad = None  # the next backward starts a fresh bfloat16 .grad

    handles = [p.register_post_accumulate_grad_hook(add_and_free) for p in model.parameters()]
    for mb in micro_batches:
        pred = model(mb.x.to(torch.bfloat16))
        (torch.nn.functional.mse_loss(pred.float(), mb.y.float()) / k).backward()
    for h in handles:
        h.remove()
    return main


def accumulate_then_convert(model, micro_batches):
    """Accumulates in the bfloat16 .grad and converts at the end: the rounding already happened."""
    k = len(micro_batches)
    for mb in micro_batches:
        pred = model(mb.x.to(torch.bfloat16))
        (torch.nn.functional.mse_loss(pred.float(), mb.y.float()) / k).backward()
    out = {n: p.grad.float() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return out


SOLUTIONS = {"12.1": 256, "12.2": (1 / 8, 1.0), "12.3": b_simple, "12.4": accumulate_fp32}
WRONG = {
    "12.1": 4096,
    "12.2": (0.5, 0.5),
    "12.3": b_simple_raw_second_moment,
    "12.4": accumulate_then_convert,
}
