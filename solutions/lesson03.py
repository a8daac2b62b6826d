"""Solutions to lesson 03's exercises (and one wrong answer each, which the checker must reject)."""

import torch.nn.functional as F

import accumlab as al


def accumulate(model, micro_batches, class_weight):
    # with weight=, the full-batch mean divides by the targets' summed class weights, not by
    # their count: find that divisor for the whole window BEFORE any backward
    total = sum(float(class_weight[mb.y[mb.y != al.IGNORE_INDEX]].sum()) for mb in micro_batches)
    for mb in micro_batches:
        logits = model(mb.x)
        loss_sum = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            mb.y.reshape(-1),
            weight=class_weight,
            ignore_index=al.IGNORE_INDEX,
            reduction="sum",
        )
        (loss_sum / total).backward()


def accumulate_by_token_count(model, micro_batches, class_weight):
    # the unweighted recipe: right direction, wrong size (the summed weight is not the count)
    total = sum(int((mb.y != al.IGNORE_INDEX).sum()) for mb in micro_batches)
    for mb in micro_batches:
        logits = model(mb.x)
        loss_sum = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            mb.y.reshape(-1),
            weight=class_weight,
            ignore_index=al.IGNORE_INDEX,
            reduction="sum",
        )
        (loss_sum / total).backward()


SOLUTIONS = {
    "03.1": 2.1,  # k · (70 · 1.5 / 100): the last scaled micro-loss is its sum over all N tokens
    "03.2": al.Recipe(
        2, 3, "mean", "divide_by_actual"
    ),  # 11 full micro-batches: windows 3, 3, 3, 2
    "03.3": 100,  # 30 + 10 + 45 + 15: a SUM all-reduce divides by nothing
    "03.4": accumulate,
}

WRONG = {
    "03.1": 1.65,  # what the log should print, not what it prints
    "03.2": al.Recipe(4, 3, "mean", "divide_by_actual"),  # the last micro-batch holds 2 samples
    "03.3": 50,  # N / ranks: DDP's average, not a sum
    "03.4": accumulate_by_token_count,
}
