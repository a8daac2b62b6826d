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
        before = scaler.get_scale()
        scaler.update()
        if scaler.get_scale() >= before:  # update() halves the scale after a skipped step
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
    # CosineAnnealingLR(T_max=400) after 8 × 30 + 7 = 247 calls: (1 + cos(π·247/400)) / 2
    "06.1": 0.320,
    "06.2": [
        "zero_grad",
        "backward",
        "backward",
        "unscale_(g)",
        "unscale_(d)",
        "clip(g)",
        "clip(d)",
        "step(g)",
        "step(d)",
        "update",
        "scheduler.step",
    ],
    "06.3": train,
}

WRONG = {
    "06.1": 0.0,
    "06.2": [
        "zero_grad",
        "backward",
        "backward",
        "unscale_(g)",
        "clip(g)",
        "step(g)",
        "update",
        "unscale_(d)",
        "clip(d)",
        "step(d)",
        "update",
        "scheduler.step",
    ],
    "06.3": train_scheduler_per_micro_batch,
}
