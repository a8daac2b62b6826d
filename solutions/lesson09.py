"""Solutions to lesson 09's exercises, and one wrong answer each (tests/test_exercises.py)."""

import torch

import accumlab as al


def train_window(model, micro_batches, optimizer, update_ema):
    k = len(micro_batches)
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()
    optimizer.step()
    update_ema()  # once per optimizer step: the EMA's β keeps its meaning
    optimizer.zero_grad(set_to_none=True)


def train_window_per_micro_step(model, micro_batches, optimizer, update_ema):
    k = len(micro_batches)
    for i, mb in enumerate(micro_batches):
        (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()
        if i == k - 1:
            optimizer.step()
        update_ema()  # the bug: k updates per optimizer step
    optimizer.zero_grad(set_to_none=True)


def gradcache_step(model, data, micro_batch_size):
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        reps = [model(al.coupling.pair_inputs(c)) for c in chunks]
    q = torch.cat([z[: len(c)] for z, c in zip(reps, chunks)]).requires_grad_()
    p = torch.cat([z[len(c) :] for z, c in zip(reps, chunks)]).requires_grad_()
    al.coupling.info_nce(q, p).backward()
    sizes = [len(c) for c in chunks]
    for c, gq, gk in zip(chunks, q.grad.split(sizes), p.grad.split(sizes)):
        z = model(al.coupling.pair_inputs(c))
        ((z[: len(c)] * gq).sum() + (z[len(c) :] * gk).sum()).backward()


def all_graphs_alive(model, data, micro_batch_size):
    # every micro-batch forwarded with a graph, all kept until one backward: big-batch memory
    chunks = data.micro_batches(micro_batch_size)
    reps = [model(al.coupling.pair_inputs(c)) for c in chunks]
    q = torch.cat([z[: len(c)] for z, c in zip(reps, chunks)])
    p = torch.cat([z[len(c) :] for z, c in zip(reps, chunks)])
    al.coupling.info_nce(q, p).backward()


def naive_step(model, data, micro_batch_size):
    chunks = data.micro_batches(micro_batch_size)
    for c in chunks:
        (al.coupling.contrastive_loss(model, c) / len(chunks)).backward()


SOLUTIONS = {
    "09.1": 0.9 ** (1 / 16),
    "09.2": {"token_mean_global", "constant"},
    "09.3": train_window,
    "09.4": gradcache_step,
}

WRONG = {
    "09.1": 1 - 0.1 / 16,
    "09.2": {"seq_mean", "token_mean_global", "constant"},
    "09.3": train_window_per_micro_step,
    "09.4": naive_step,
}
