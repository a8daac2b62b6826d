"""Solutions to lesson 11's exercises (and one wrong answer each, which the checker must reject)."""

import torch.nn.functional as F

import accumlab as al


def token_loss(outputs, labels, num_items_in_batch=None):
    logits = outputs["logits"]
    total = F.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=al.IGNORE_INDEX, reduction="sum"
    )
    return total / num_items_in_batch  # the window's real tokens, counted by the Trainer


def token_mean_loss(outputs, labels, num_items_in_batch=None):
    logits = outputs["logits"]
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=al.IGNORE_INDEX)


def exact_epoch(accelerator, model, optimizer, scheduler, loader, k):
    # the epoch's real tokens, from a pass over the labels only: a total, the same in any order
    total = sum(int((y != al.IGNORE_INDEX).sum()) for _, y in loader)
    batches, left, counted = iter(loader), len(loader), 0
    while left:
        size = min(k, left)
        left -= size
        if left:  # a window's batches taken first, counted from the very batches it trains on
            window = [next(batches) for _ in range(size)]
            tokens = sum(int((y != al.IGNORE_INDEX).sum()) for _, y in window)
        else:  # the last window, fetched as it trains: taken first, the loader would report its
            # end before the window's first backward, and accumulate() would sync each (3.1)
            window, tokens = batches, total - counted
        counted += tokens
        for x, y in window:
            with accelerator.accumulate(model):
                logits = model(x)
                loss = F.cross_entropy(
                    logits.flatten(0, 1), y.flatten(), ignore_index=al.IGNORE_INDEX, reduction="sum"
                )
                accelerator.backward(loss * k / tokens)  # × k undoes backward's own ÷ k
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()


def docs_epoch(accelerator, model, optimizer, scheduler, loader, k):
    for x, y in loader:
        with accelerator.accumulate(model):
            logits = model(x)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=al.IGNORE_INDEX)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


SOLUTIONS = {
    "11.1": (2, 3 / 7),
    "11.2": token_loss,
    "11.3": exact_epoch,
}

WRONG = {
    "11.1": (2, 1.0),
    "11.2": token_mean_loss,
    "11.3": docs_epoch,
}
