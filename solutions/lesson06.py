"""Solutions to lesson 06's exercises (and one wrong answer each, to show the checkers can fail)."""

import torch


def train(model, batches, k, max_norm, make_scheduler, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            loss = torch.nn.functional.mse_loss(pred.float(), y) / k
            scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        scaler.update()
        scheduler.step()
    return model


def train_scheduler_per_micro_batch(model, batches, k, max_norm, make_scheduler, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for i, (x, y) in enumerate(batches):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pred = model(x)
        scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
        if (i + 1) % k == 0:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
        scheduler.step()  # wrong: once per micro-batch
    return model


SOLUTIONS = {
    "06.1": 50,
    "06.2": [
        "zero_grad",
        "backward",
        "backward",
        "backward",
        "unscale_",
        "clip",
        "step",
        "update",
        "scheduler.step",
    ],
    "06.3": train,
}

WRONG = {
    "06.1": 400,
    "06.2": [
        "zero_grad",
        "backward",
        "unscale_",
        "backward",
        "backward",
        "clip",
        "step",
        "update",
        "scheduler.step",
    ],
    "06.3": train_scheduler_per_micro_batch,
}
