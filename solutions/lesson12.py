"""Solutions to lesson 12's exercises, and one wrong answer each (tests/test_exercises.py)."""

import torch


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


def float32_copy_full_batch(model, micro_batches):
    """Skips the technique: one full-batch backward of a float32 copy (exact, and no accumulation)."""
    import copy

    full = copy.deepcopy(model).float()
    x = torch.cat([mb.x for mb in micro_batches]).float()
    y = torch.cat([mb.y for mb in micro_batches]).float()
    torch.nn.functional.mse_loss(full(x), y).backward()
    return {n: p.grad for n, p in full.named_parameters()}


SOLUTIONS = {"12.1": 2048, "12.2": (1 / 64, 1 / 8, 1.0), "12.3": accumulate_fp32}
WRONG = {
    "12.1": 256,
    "12.2": (1 / 3, 1 / 3, 1 / 3),
    "12.3": float32_copy_full_batch,
}
