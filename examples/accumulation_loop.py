"""Gradient accumulation for a language model: the loop lesson 03 of accumlab ends with.

Plain PyTorch, to copy. One optimizer step per window of up to k micro-batches: the window is
fetched first, its real tokens counted, then every micro-batch's summed token loss is divided by
that count, so each real token weighs 1/N as in one big batch, whatever the sequence lengths and
however short the last window. accumlab's tests/test_examples.py checks it against the full-batch
gradient (one process and two data-parallel ones) and with al.audit; the lesson runs the same code.

    python examples/accumulation_loop.py
"""

from contextlib import nullcontext
from itertools import islice

import torch
import torch.distributed as dist
import torch.nn.functional as F

PAD = -100  # the label of a padding position: cross_entropy skips it


def pad_batch(samples):
    """DataLoader collate_fn: (tokens, labels) pairs of different lengths -> padded x, y. Right
    padding: a causal model needs no mask; one that mixes positions needs a mask of the padding
    built from the lengths (y == PAD also marks real tokens left unlearned, such as a prompt)."""
    tokens, labels = zip(*samples)
    x = torch.nn.utils.rnn.pad_sequence(tokens, batch_first=True)
    y = torch.nn.utils.rnn.pad_sequence(labels, batch_first=True, padding_value=PAD)
    return x, y


def train_epoch(model, optimizer, loader, k, *, scaler=None, max_norm=None, scheduler=None):
    """One epoch; returns each optimizer step's loss. Labels are already shifted (y[t] is the
    token after x[t]); with Hugging Face-style labels, shift first and count the shifted ones."""
    device = next(model.parameters()).device
    batches, losses = iter(loader), []
    while window := list(islice(batches, k)):  # the last window may hold fewer than k
        # count the window's real tokens BEFORE the first backward: each token then weighs 1/N
        n_tokens = sum(int((y != PAD).sum()) for _, y in window)
        if dist.is_initialized():  # data parallel: N over every rank, ÷ ranks as DDP averages
            count = torch.tensor(n_tokens, device=device)
            dist.all_reduce(count)
            # world size = data-parallel ranks only when every rank is a replica (no tensor or
            # pipeline parallelism; under those, use the data-parallel group's size)
            n_tokens = count.item() / dist.get_world_size()
        window_loss = 0.0
        for i, (x, y) in enumerate(window):
            x, y = x.to(device), y.to(device)
            last = i == len(window) - 1
            # DDP: skip the gradient all-reduce on all but the window's last backward (lesson 07).
            # FSDP1's no_sync keeps full unsharded gradients; FSDP2 has none: there call
            # model.set_requires_gradient_sync(last) instead
            sync = model.no_sync() if hasattr(model, "no_sync") and not last else nullcontext()
            with sync:
                logits = model(x).flatten(0, -2)
                if logits.dtype in (torch.float16, torch.bfloat16):
                    logits = logits.float()  # a 16-bit sum over many tokens rounds or overflows
                loss_sum = F.cross_entropy(logits, y.flatten(), ignore_index=PAD, reduction="sum")
                loss = loss_sum / n_tokens  # the window's count, and no ÷ k on top
                # with float16 autocast around the forward, a GradScaler scales the loss (lesson 06)
                (scaler.scale(loss) if scaler is not None else loss).backward()
            window_loss += loss.detach()
        if scaler is not None:
            scaler.unscale_(optimizer)  # clip the true gradient, not the scaled one (lesson 06)
        if max_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # once, on the window
        stepped = True
        if scaler is not None:
            scale = scaler.get_scale()
            scaler.step(optimizer)  # skips optimizer.step() when the gradient holds inf or NaN
            scaler.update()  # ...and after a skip lowers the scale: that is how a skip shows
            stepped = scaler.get_scale() >= scale
        else:
            optimizer.step()
        if scheduler is not None and stepped:
            scheduler.step()  # once per optimizer step taken, never per micro-batch
        optimizer.zero_grad(set_to_none=True)  # only here: the window accumulated in .grad
        losses.append(float(window_loss))  # the window's token mean (DDP: average over ranks)
    return losses


if __name__ == "__main__":
    torch.manual_seed(0)
    vocab = 50
    texts = [torch.randint(vocab, (n + 1,)) for n in torch.randint(1, 33, (30,)).tolist()]
    dataset = [(t[:-1], t[1:]) for t in texts]  # next-token prediction, 1 to 32 tokens each
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=True, collate_fn=pad_batch)
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, 16), torch.nn.Linear(16, vocab))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 4))
    for epoch in range(3):  # 8 micro-batches of 4, k = 3: windows of 3, 3 and 2 micro-batches
        losses = train_epoch(model, optimizer, loader, 3, max_norm=1.0, scheduler=scheduler)
        print(f"epoch {epoch}: loss per optimizer step", [f"{v:.3f}" for v in losses])
