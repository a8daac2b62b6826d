"""Solutions to lesson 03's exercises (and one wrong answer each, which the checker must reject)."""

import torch.nn.functional as F

import accumlab as al


def accumulate(model, micro_batches):
    # count the window's real tokens BEFORE any backward, then weigh each token 1/N
    total = sum(int((mb.y != al.IGNORE_INDEX).sum()) for mb in micro_batches)
    for mb in micro_batches:
        logits = model(mb.x)
        loss_sum = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            mb.y.reshape(-1),
            ignore_index=al.IGNORE_INDEX,
            reduction="sum",
        )
        (loss_sum / total).backward()


def accumulate_mean_of_means(model, micro_batches):
    for mb in micro_batches:
        logits = model(mb.x)
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), mb.y.reshape(-1), ignore_index=al.IGNORE_INDEX
        )
        (loss / len(micro_batches)).backward()


SOLUTIONS = {
    "03.1": 1.3,  # (30 · 2.0 + 70 · 1.0) / 100
    "03.2": al.Recipe(
        2, 3, "mean", "divide_by_actual"
    ),  # 11 full micro-batches: windows 3, 3, 3, 2
    "03.3": 50,  # (30 + 10 + 45 + 15) / 2 ranks
    "03.4": accumulate,
}

WRONG = {
    "03.1": 1.5,
    "03.2": al.Recipe(4, 3, "mean", "divide_by_actual"),  # the last micro-batch holds 2 samples
    "03.3": 100,
    "03.4": accumulate_mean_of_means,
}
