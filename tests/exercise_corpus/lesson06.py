"""Lesson 06: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import numpy as np
import torch

import accumlab as al

G = ["unscale_(g)", "clip(g)", "step(g)"]
D = ["unscale_(d)", "clip(d)", "step(d)"]


# --- 06.3: other right loops -------------------------------------------------------------------
def zero_grad_last(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """zero_grad after the step, scheduler after zero_grad; autocast's default CPU dtype."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for i, (x, y) in enumerate(batches):
        with torch.autocast(device_type="cpu"):  # bfloat16 is the CPU's default
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss / k).backward()
        if (i + 1) % k == 0:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            scheduler.step()
    return model


def summed_then_scaled(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """reduction='sum' over the window's sample count: the same gradient."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        n = sum(len(x) * y.shape[1] for x, y in window)
        for x, y in window:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(
                torch.nn.functional.mse_loss(pred.float(), y, reduction="sum") / n
            ).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        scaler.update()
        scheduler.step()
        opt.zero_grad(set_to_none=True)
    return model


# --- 06.3: wrong loops -------------------------------------------------------------------------
def package_with_weights_copied(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """accumlab's own loop does the work; its weights are copied back into the model."""
    data = al.Data(torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches]))
    trace = al.precision.amp_train(
        model, data, micro_batch_size=len(batches[0][0]), accumulation_steps=k,
        max_norm=max_norm, lr=lr, scheduler=make_scheduler,
    )  # fmt: skip
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(trace.params[-1][name])
    return model


def float32_without_a_scaler(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Skips the technique: no autocast, no GradScaler (the weights end up close)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        for x, y in batches[start : start + k]:
            (torch.nn.functional.mse_loss(model(x), y) / k).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        scheduler.step()
    return model


def clip_before_unscale(model, batches, k, max_norm, make_scheduler, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # on scaled gradients
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        scheduler.step()
    return model


def optimizer_step_not_scaler(model, batches, k, max_norm, make_scheduler, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()  # no inf check
        scaler.update()
        scheduler.step()
    return model


def no_division(model, batches, k, max_norm, make_scheduler, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y)).backward()  # no / k
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        scaler.update()
        scheduler.step()
    return model


RIGHT = {
    "06.1": [
        ("rounded to 2 digits", 1.0),
        ("a numpy float", np.float64(0.999)),
        ("a 0-d tensor", torch.tensor(0.9992)),
        ("an int", 1),
    ],
    "06.2": [
        (
            "zero_grad between update and scheduler.step",
            ["backward", "backward", *G, *D, "update", "zero_grad", "scheduler.step"],
        ),
        (
            "each optimizer finished in turn, zero_grad last",
            ["backward", "backward", *G, *D, "update", "scheduler.step", "zero_grad"],
        ),
        (
            "a tuple, unscale_ both then clip both",
            (
                "zero_grad",
                "backward",
                "backward",
                "unscale_(d)",
                "unscale_(g)",
                "clip(d)",
                "clip(g)",
                "step(d)",
                "step(g)",
                "scheduler.step",
                "update",
            ),
        ),
    ],
    "06.3": [
        ("zero_grad last, autocast's default dtype", zero_grad_last),
        ("reduction='sum' over the window", summed_then_scaled),
    ],
}
WRONG = {
    "06.1": [
        ("the value with one step per optimizer step", 0.8536),
        ("half", 0.5),
        ("a string", "1.0"),
    ],
    "06.2": [
        (
            "unscale_ inside the window",
            [
                "zero_grad",
                "backward",
                "unscale_(g)",
                "unscale_(d)",
                "backward",
                "clip(g)",
                "clip(d)",
                "step(g)",
                "step(d)",
                "update",
                "scheduler.step",
            ],
        ),
        (
            "clip before unscale_",
            [
                "zero_grad",
                "backward",
                "backward",
                "clip(g)",
                "clip(d)",
                "unscale_(g)",
                "unscale_(d)",
                "step(g)",
                "step(d)",
                "update",
                "scheduler.step",
            ],
        ),
        (
            "update before the second step",
            ["zero_grad", "backward", "backward", *G, "update", *D, "scheduler.step"],
        ),
        (
            "zero_grad between the two steps",
            ["backward", "backward", *G, "zero_grad", *D, "update", "scheduler.step"],
        ),
        ("one backward", ["zero_grad", "backward", *G, *D, "update", "scheduler.step"]),
        ("a string", "zero_grad backward"),
    ],
    "06.3": [
        ("al.precision.amp_train with the weights copied back", package_with_weights_copied),
        ("float32 without autocast or a scaler", float32_without_a_scaler),
        ("clip before unscale_", clip_before_unscale),
        ("optimizer.step() instead of scaler.step()", optimizer_step_not_scaler),
        ("no / k", no_division),
    ],
}
STUBS = {"06.2": [("None", None)]}
