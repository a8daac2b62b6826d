"""Lesson 03: right, wrong and unanswered answers for its exercises (see __init__.py)."""

from fractions import Fraction

import numpy as np
import torch
import torch.nn.functional as F

import accumlab as al


def _token_loss_sum(model, mb):
    logits = model(mb.x)
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), mb.y.reshape(-1), ignore_index=-100, reduction="sum"
    )


# --- 03.4, right: other ways to weigh every token 1/N ---------------------------------------------


def mean_times_share(model, micro_batches):
    """Each micro-batch's MEAN, weighted by its share of the window's tokens: nᵢ/N · mean = sum/N."""
    counts = [int(mb.y.ne(-100).sum()) for mb in micro_batches]
    for mb, n in zip(micro_batches, counts, strict=True):
        if n == 0:
            continue
        logits = model(mb.x)
        mean = F.cross_entropy(logits.flatten(0, 1), mb.y.flatten(), ignore_index=-100)
        (mean * n / sum(counts)).backward()


def count_as_tensor(model, micro_batches):
    """The count kept as a tensor, the loss summed over tokens by hand with a mask."""
    total = torch.stack([(mb.y != -100).sum() for mb in micro_batches]).sum()
    for mb in micro_batches:
        logp = torch.log_softmax(model(mb.x), dim=-1)
        real = mb.y != -100
        picked = logp.gather(-1, mb.y.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        (-(picked * real).sum() / total).backward()


# --- 03.4, wrong ------------------------------------------------------------------------------------


def one_forward_for_all(model, micro_batches):
    """Skips the technique: every micro-batch concatenated into one forward and one backward."""
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    logits = model(x)
    F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100).backward()


def copies_the_reference(model, micro_batches):
    """Calls accumlab's own full-batch gradient and copies it into .grad."""
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    grads = al.full_batch_grads(model, al.Data(x, y), loss="cross_entropy")
    for name, p in model.named_parameters():
        p.grad = grads[name].clone()


def copies_accumulated_grads(model, micro_batches):
    """Calls accumlab's accumulation with the global count and copies the result into .grad."""
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    size = len(micro_batches[0])
    grads = al.accumulated_grads(
        model, al.Data(x, y), size, normalization="global", loss="cross_entropy"
    )
    for name, p in model.named_parameters():
        p.grad = grads[name].clone()


def one_backward_on_the_sum(model, micro_batches):
    """Right weights, but every graph kept alive until one backward on the summed loss."""
    total = sum(int((mb.y != -100).sum()) for mb in micro_batches)
    (sum(_token_loss_sum(model, mb) for mb in micro_batches) / total).backward()


def count_per_micro_batch(model, micro_batches):
    """Each micro-batch's sum divided by its own count: k micro-batch means, not divided by k."""
    for mb in micro_batches:
        (_token_loss_sum(model, mb) / int((mb.y != -100).sum())).backward()


def divided_by_k_too(model, micro_batches):
    """The global count, then ÷ k as well: 1/k of the full-batch gradient."""
    total = sum(int((mb.y != -100).sum()) for mb in micro_batches)
    for mb in micro_batches:
        (_token_loss_sum(model, mb) / total / len(micro_batches)).backward()


def autograd_grad_by_hand(model, micro_batches):
    """Right weights, but torch.autograd.grad and hand-written .grad instead of backward."""
    total = sum(int((mb.y != -100).sum()) for mb in micro_batches)
    params = list(model.parameters())
    for mb in micro_batches:
        grads = torch.autograd.grad(_token_loss_sum(model, mb) / total, params)
        for p, g in zip(params, grads, strict=True):
            p.grad = g if p.grad is None else p.grad + g


def accumulate_stub(model, micro_batches):
    """Accumulate .grad over `micro_batches` (al.Data: token ids x, labels y with -100 on padding)."""
    ...


RIGHT: dict = {
    "03.1": [
        (
            "float32, the same computation",
            torch.tensor([30.0, 70.0]) @ torch.tensor([2.0, 1.0]) / 100,
        ),
        ("numpy float", np.float64(1.3)),
        ("a fraction", Fraction(13, 10)),
        ("3 digits, truncated from 1.2999", 1.29),
    ],
    "03.2": [
        ("micro-batches of 1", al.Recipe(1, 3)),
        ("micro-batches of 11: one short window", al.Recipe(11, 3, "mean", "divide_by_actual")),
        ("a numpy micro-batch size", al.Recipe(np.int64(2), 3, last_window="divide_by_actual")),
    ],
    "03.3": [
        ("0-d tensor", torch.tensor(50.0)),
        ("numpy integer", np.int64(50)),
        ("the computation", (30 + 10 + 45 + 15) / 2),
    ],
    "03.4": [
        ("each mean weighted by its share of tokens", mean_times_share),
        ("count as a tensor, masked sum by hand", count_as_tensor),
    ],
}

WRONG: dict = {
    "03.1": [
        ("the summed loss", 130),
        ("weights swapped", 1.7),
        ("numpy mean of means", np.float64(1.5)),
    ],
    "03.2": [
        ("changes the loss to the global count", al.Recipe(4, 3, "global")),
        ("skips accumulation: one micro-batch of 22", al.Recipe(22, 3)),
        ("k = 1: no accumulation", al.Recipe(2, 1)),
        ("full micro-batches, divide_by_k", al.Recipe(2, 3, "mean", "divide_by_k")),
        ("full micro-batches, drop", al.Recipe(2, 3, "mean", "drop")),
        ("zeroed every micro-step", al.Recipe(2, 3, zero_grad="every_micro_step")),
    ],
    "03.3": [
        ("the micro-batch's own count", 15),
        ("rank 1's own window", 60),
        ("numpy: the global count without ÷ ranks", np.int64(100)),
    ],
    "03.4": [
        ("skips the technique: one forward over everything", one_forward_for_all),
        ("calls al.full_batch_grads and copies it", copies_the_reference),
        ("calls al.accumulated_grads and copies it", copies_accumulated_grads),
        ("one backward on the summed loss", one_backward_on_the_sum),
        ("each micro-batch ÷ its own count", count_per_micro_batch),
        ("global count and ÷ k", divided_by_k_too),
        ("torch.autograd.grad by hand", autograd_grad_by_hand),
    ],
}

STUBS: dict = {
    "03.1": [("the cell as handed out", None)],
    "03.2": [("the cell as handed out", None)],
    "03.3": [("the cell as handed out", None)],
    "03.4": [("a body of ...", accumulate_stub)],
}
