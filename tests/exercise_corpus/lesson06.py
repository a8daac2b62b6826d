"""Lesson 06: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import math

import numpy as np
import torch
from torch.nn.utils import clip_grad_norm_ as clip_bound_early

import accumlab as al
from accumlab.exercises.lesson06 import reference_train as reference_bound_early

G = ["unscale_(g)", "clip(g)", "step(g)"]
D = ["unscale_(d)", "clip(d)", "step(d)"]


# --- 06.3: other right loops (each holds the scheduler on a skipped step, told another way) -------
def zero_grad_last(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """zero_grad after the step, scheduler after zero_grad; autocast's default CPU dtype; the skip
    read from the scale going down."""
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
            scale = scaler.get_scale()
            scaler.update()
            skipped = scaler.get_scale() < scale
            opt.zero_grad()
            if not skipped:
                scheduler.step()
    return model


def summed_then_scaled(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """reduction='sum' over the window's sample count: the same gradient; the skip seen by a step
    hook (scaler.step does not call optimizer.step on a skipped window)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    stepped = []
    opt.register_step_post_hook(lambda *_: stepped.append(True))
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
        stepped.clear()
        scaler.step(opt)
        scaler.update()
        if stepped:
            scheduler.step()
        opt.zero_grad(set_to_none=True)
    return model


def clip_imported_by_name(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """`from torch.nn.utils import clip_grad_norm_` at the top of the notebook; the skip read from
    the norm it returns (inf or NaN exactly when scaler.step skips)."""
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
        norm = clip_bound_early(model.parameters(), max_norm)
        scaler.step(opt)
        scaler.update()
        if torch.isfinite(norm):
            scheduler.step()
    return model


def total_norm_then_clip(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """get_total_norm + clip_grads_with_norm_, the two halves of clip_grad_norm_ (torch >= 2.6)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=False)
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
        scaler.unscale_(opt)
        grads = [p.grad for p in model.parameters()]
        norm = torch.nn.utils.get_total_norm(grads)
        torch.nn.utils.clip_grads_with_norm_(model.parameters(), max_norm, norm)
        scaler.step(opt)
        scaler.update()
        if norm.isfinite():
            scheduler.step()
    return model


def fused_sgd(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """SGD(fused=True): scaler.step always calls its step, and the kernel skips the update; the
    skip read from the scale."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, fused=True)
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
        scaler.step(opt)
        scale = scaler.get_scale()
        scaler.update()
        if scaler.get_scale() >= scale:
            scheduler.step()
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


def reference_imported(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """The checker's own reference, bound before the check, its weights copied back."""
    params = reference_bound_early(model, batches, k, max_norm, make_scheduler, lr)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name])
    return model


def _amp_loop(model, batches, k, max_norm, make_scheduler, lr, *, micro, scaler=None, zero=True):
    """The right loop with one part swapped: `micro(model, window, scaler, opt)` runs the window's
    forwards and backwards."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = scaler or torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        if zero:
            opt.zero_grad(set_to_none=True)
        micro(model, batches[start : start + k], scaler, opt, max_norm)
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        scaler.update()
        scheduler.step()
    return model


def _per_micro_batch(model, window, scaler, opt, max_norm):
    for x, y in window:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pred = model(x)
        scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / len(window)).backward()


def one_forward_per_window(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """One forward over the concatenated window, then k backwards on slices (retain_graph)."""

    def micro(model, window, scaler, opt, max_norm):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pred = model(torch.cat([x for x, _ in window]))
        m = len(window[0][0])
        for i, (_, y) in enumerate(window):
            loss = torch.nn.functional.mse_loss(pred[i * m : (i + 1) * m].float(), y) / k
            scaler.scale(loss).backward(retain_graph=i < k - 1)

    return _amp_loop(model, batches, k, max_norm, make_scheduler, lr, micro=micro)


def disabled_scaler(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """GradScaler('cpu', enabled=False): every call made, nothing scaled."""
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    return _amp_loop(
        model, batches, k, max_norm, make_scheduler, lr, micro=_per_micro_batch, scaler=scaler
    )


def full_window_and_dummy_scales(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """One backward over the whole window; k - 1 scale() calls on zeros to make up the count."""

    def micro(model, window, scaler, opt, max_norm):
        x, y = torch.cat([x for x, _ in window]), torch.cat([y for _, y in window])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        for _ in range(k - 1):
            scaler.scale(torch.zeros(()))

    return _amp_loop(model, batches, k, max_norm, make_scheduler, lr, micro=micro)


def never_zero_grad(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Never zeroes .grad (unscale_ then divides the leftover by the scale: the result is close)."""
    return _amp_loop(
        model, batches, k, max_norm, make_scheduler, lr, micro=_per_micro_batch, zero=False
    )


def clip_every_micro_batch(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Unscales and clips after every backward via a second scaler-free path (no error raised)."""

    def micro(model, window, scaler, opt, max_norm):
        for x, y in window:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm * scaler.get_scale())

    return _amp_loop(model, batches, k, max_norm, make_scheduler, lr, micro=micro)


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


def _plain(model, batches, k, max_norm, make_scheduler, lr, *, where="end", scaler=None):
    """The lesson's section-1 loop with scheduler.step() every window, skipped or not (`where`:
    after the step, or at the window's start)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = scaler or torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        if where == "start":
            scheduler.step()
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        scaler.update()
        if where == "end":
            scheduler.step()
    return model


def scheduler_steps_on_skip(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Section 1's loop plus scheduler.step() every window: it steps on the skipped one too."""
    return _plain(model, batches, k, max_norm, make_scheduler, lr)


def scheduler_at_window_start(model, batches, k, max_norm, make_scheduler, lr=0.1):
    return _plain(model, batches, k, max_norm, make_scheduler, lr, where="start")


def tiny_init_scale(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """GradScaler('cpu', init_scale=2.0): the losses are scaled, by 2."""
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0)
    return _plain(model, batches, k, max_norm, make_scheduler, lr, scaler=scaler)


def forwards_first(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """All k forwards of a window, then the k backwards: the whole window's graphs alive."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        losses = []
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            losses.append(torch.nn.functional.mse_loss(pred.float(), y) / k)
        for loss in losses:
            scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        scale = scaler.get_scale()
        scaler.update()
        if scaler.get_scale() >= scale:
            scheduler.step()
    return model


def manual_unscale_and_dummy_step(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Unscales by hand, steps the model's optimizer itself, and feeds the scaler a dummy
    optimizer so every scaler call is made: no inf check guards the model."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    dummy_param = torch.nn.Parameter(torch.zeros(1))
    dummy = torch.optim.SGD([dummy_param], lr=0.0)
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
        for p in model.parameters():
            p.grad.mul_(1.0 / scaler.get_scale())
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        dummy_param.grad = torch.zeros(1)
        scaler.unscale_(dummy)
        scaler.step(dummy)
        scaler.update()
        scheduler.step()
    return model


def drops_the_infinite_loss(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Skips the backward of a micro-batch whose loss is not finite, and steps on the rest."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            loss = torch.nn.functional.mse_loss(pred.float(), y) / k
            if torch.isfinite(loss):
                scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        scaler.update()
        scheduler.step()
    return model


RIGHT = {
    "06.1": [
        ("3 digits", 0.320),
        ("a numpy float", np.float64(0.3196)),
        ("a 0-d tensor", torch.tensor(0.3196)),
        ("the closed form, 247 calls", (1 + math.cos(math.pi * 247 / 400)) / 2),
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
        ("clip_grad_norm_ imported by name before the check", clip_imported_by_name),
        ("get_total_norm + clip_grads_with_norm_", total_norm_then_clip),
        ("SGD(fused=True): the kernel skips", fused_sgd),
    ],
}
WRONG = {
    "06.1": [
        ("the value with one step per optimizer step (30 calls)", 0.986),
        ("the lr untouched, an int", 1),
        ("the lr untouched", 1.0),
        ("240 calls: the window's own calls forgotten", 0.345),
        ("248 calls: one too many", 0.316),
        ("half", 0.5),
        ("a string", "0.320"),
        ("the right fraction as a percent", 31.96),
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
        ("the checker's reference_train, imported early", reference_imported),
        ("one forward per window, backward on slices", one_forward_per_window),
        ("GradScaler(enabled=False)", disabled_scaler),
        ("one backward per window and dummy scale() calls", full_window_and_dummy_scales),
        ("never zero_grad", never_zero_grad),
        ("clip after every backward", clip_every_micro_batch),
        ("float32 without autocast or a scaler", float32_without_a_scaler),
        ("clip before unscale_", clip_before_unscale),
        ("optimizer.step() instead of scaler.step()", optimizer_step_not_scaler),
        ("no / k", no_division),
        ("the scheduler stepped on the skipped window", scheduler_steps_on_skip),
        ("the scheduler stepped at the window's start", scheduler_at_window_start),
        ("GradScaler('cpu', init_scale=2.0)", tiny_init_scale),
        ("all forwards of a window, then the backwards", forwards_first),
        (
            "unscale by hand, optimizer.step(), a dummy for the scaler",
            manual_unscale_and_dummy_step,
        ),
        ("the inf micro-batch's backward left out", drops_the_infinite_loss),
    ],
}
# the words the hint of each of these wrong answers must contain
HINTS = {
    "the scheduler stepped on the skipped window": "Hold it on a skipped step",
    "the scheduler stepped at the window's start": "step the scheduler after the optimizer step",
    "GradScaler('cpu', init_scale=2.0)": "your GradScaler's scale was 2",
    "all forwards of a window, then the backwards": "graphs alive",
    "unscale by hand, optimizer.step(), a dummy for the scaler": "only scaler.step(optimizer) skips",
    # the checker's overflow is in the backward only, so the loss this loop tests stays finite:
    # it drops nothing and steps the scheduler on the skipped window
    "the inf micro-batch's backward left out": "Hold it on a skipped step",
    "clip before unscale_": "Unscale_ first, then clip",
}
STUBS = {"06.2": [("None", None)]}


def _decoys_and_a_copy(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Decoy passes on an unrelated loss, one full-batch backward on an unwatched copy, its
    gradient (scaled) written into .grad, then the usual unscale, clip, step and update."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    twin = al.mlp(features=4, hidden=16, depth=1, seed=3, dtype=torch.float32)
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        window = batches[start : start + k]
        for x, y in window:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(pred.float().sum() + 0 * y.sum()).backward()
        twin.load_state_dict(model.state_dict())
        twin.zero_grad()
        xs, ys = torch.cat([x for x, _ in window]), torch.cat([y for _, y in window])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = twin(xs)
        torch.nn.functional.mse_loss(out.float(), ys).backward()
        scale = scaler.get_scale()
        with torch.no_grad():
            for a, b in zip(model.parameters(), twin.parameters(), strict=True):
                a.grad.copy_(b.grad * scale)
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        before = scaler.get_scale()
        scaler.update()
        if scaler.get_scale() >= before:
            scheduler.step()
    return model


WRONG["06.3"].append(("decoy passes, a copy's gradient written in", _decoys_and_a_copy))
HINTS["decoy passes, a copy's gradient written in"] = "its own loss's gradient"
# names the call it counted, not how far the answer is
HINTS["248 calls: one too many"] = "includes the scheduler call made after"


def _loop(
    model, batches, k, max_norm, make_scheduler, *, opt, forward=None, held=None, scale_k=True
):
    """The right loop, with its optimizer, forward, hold test and loss division as given: the
    pieces the answers below change one at a time."""
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    forward = forward or model
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        window = batches[start : start + k]
        for x, y in window:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = forward(x)
            loss = torch.nn.functional.mse_loss(pred.float(), y)
            scaler.scale(loss / k if scale_k else loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        before = scaler.get_scale()
        scaler.update()
        skipped = held(window) if held else scaler.get_scale() < before
        if not skipped:
            scheduler.step()
    return model


def layer_by_layer(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Plain SGD with its defaults spelt out; the layers called one by one."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.0, weight_decay=0.0, nesterov=False)

    def forward(x):
        for layer in model:
            x = layer(x)
        return x

    return _loop(model, batches, k, max_norm, make_scheduler, opt=opt, forward=forward)


def small_momentum(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """SGD(momentum=0.03): its weights stay within the bfloat16 tolerance of the right loop's."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.03)
    return _loop(model, batches, k, max_norm, make_scheduler, opt=opt)


def small_weight_decay(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """SGD(weight_decay=1e-3), as close to the right loop's weights as momentum 0.03."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, weight_decay=1e-3)
    return _loop(model, batches, k, max_norm, make_scheduler, opt=opt)


def momentum_reset_before_return(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """SGD(momentum=0.03) for the whole run, its param groups set back to plain SGD before the
    return: the settings the steps ran with are what counts."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.03)
    _loop(model, batches, k, max_norm, make_scheduler, opt=opt)
    for group in opt.param_groups:
        group["momentum"] = 0.0
    return model


def adam(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Adam for SGD."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    return _loop(model, batches, k, max_norm, make_scheduler, opt=opt)


def holds_on_inf_targets(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Holds the scheduler when the window's data holds an inf, without asking the scaler: a
    float16 overflow does not show in the data."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    held = lambda window: any(bool(torch.isinf(y).any()) for _, y in window)  # noqa: E731
    return _loop(model, batches, k, max_norm, make_scheduler, opt=opt, held=held)


def _hold_loop(model, batches, k, max_norm, make_scheduler, lr, *, on_loss):
    """The right loop, holding the scheduler on a non-finite window loss (`on_loss`) or on a
    non-finite norm from clip_grad_norm_, without asking the scaler."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        finite_loss = True
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            loss = torch.nn.functional.mse_loss(pred.float(), y) / k
            finite_loss &= bool(torch.isfinite(loss))
            scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        scaler.update()
        if finite_loss if on_loss else bool(torch.isfinite(norm)):
            scheduler.step()
    return model


def holds_on_inf_loss(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Holds when a window's loss is non-finite: a float16 overflow in the scaled backward leaves
    the loss finite."""
    return _hold_loop(model, batches, k, max_norm, make_scheduler, lr, on_loss=True)


def holds_on_inf_clip_norm(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Holds when clip_grad_norm_ (after unscale_) returns a non-finite norm: the same test as the
    scaler's found_inf."""
    return _hold_loop(model, batches, k, max_norm, make_scheduler, lr, on_loss=False)


def lr_over_k(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """The / k moved from the loss into SGD's lr."""
    opt = torch.optim.SGD(model.parameters(), lr=lr / k)
    return _loop(model, batches, k, max_norm, make_scheduler, opt=opt, scale_k=False)


def bfloat16_parameters(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """model.bfloat16(): 16-bit parameters, so .grad accumulates in bfloat16."""
    model.bfloat16()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    return _loop(model, batches, k, max_norm, make_scheduler, opt=opt)


RIGHT["06.3"] += [
    ("plain SGD spelt out, the layers one by one", layer_by_layer),
    ("the hold read from clip_grad_norm_'s non-finite norm", holds_on_inf_clip_norm),
]
WRONG["06.3"] += [
    ("the hold read from an inf loss", holds_on_inf_loss),
    ("SGD(momentum=0.03)", small_momentum),
    ("SGD(momentum=0.03), reset to 0 before the return", momentum_reset_before_return),
    ("SGD(weight_decay=1e-3)", small_weight_decay),
    ("Adam", adam),
    ("the hold read from inf targets", holds_on_inf_targets),
    ("SGD at lr / k, the loss not divided", lr_over_k),
    ("model.bfloat16()", bfloat16_parameters),
]
HINTS.update({
    "SGD(momentum=0.03)": "stepped with {'momentum': 0.03}",
    "SGD(momentum=0.03), reset to 0 before the return": "stepped with {'momentum': 0.03}",
    "SGD(weight_decay=1e-3)": "stepped with {'weight_decay': 0.001}",
    "Adam": "the optimizer was Adam",
    "the hold read from inf targets": "Hold it on a skipped step",
    "the hold read from an inf loss": "Hold it on a skipped step",
    "SGD at lr / k, the loss not divided": "build SGD with lr=lr",
    "model.bfloat16()": "keep them float32",
})  # fmt: skip


def summed_beside_grad(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """The right loop, but .grad zeroed before every backward and the window summed in a buffer
    of its own, copied into .grad before unscale_: backward never adds into .grad."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        buffer = [torch.zeros_like(p) for p in model.parameters()]
        for x, y in batches[start : start + k]:
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
            for b, p in zip(buffer, model.parameters(), strict=True):
                b += p.grad
        for b, p in zip(buffer, model.parameters(), strict=True):
            p.grad = b
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        before = scaler.get_scale()
        scaler.update()
        if scaler.get_scale() >= before:
            scheduler.step()
    return model


WRONG["06.3"].append(("zeroed each pass, the window summed beside .grad", summed_beside_grad))
HINTS["zeroed each pass, the window summed beside .grad"] = "your loop zeroed .grad"


def scaler_per_window(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """The right loop, but a fresh GradScaler for every window: the scale update() lowered after
    an overflow is thrown away, and every window starts again at 65 536."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    for start in range(0, len(batches), k):
        scaler = torch.amp.GradScaler("cpu")
        opt.zero_grad(set_to_none=True)
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        before = scaler.get_scale()
        scaler.update()
        if scaler.get_scale() >= before:
            scheduler.step()
    return model


WRONG["06.3"].append(("a fresh GradScaler every window", scaler_per_window))
HINTS["a fresh GradScaler every window"] = "build one before the loop"


def weights_read_from_the_checker(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """The loss not divided by k, then the weights overwritten with the correct loop's, read from
    the checker's frame wherever it already holds them."""
    import sys

    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y)).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        before = scaler.get_scale()
        scaler.update()
        if scaler.get_scale() >= before:
            scheduler.step()
    frame = sys._getframe(1)
    while frame is not None and not (
        frame.f_code.co_name == "full_loop" and "expected" in frame.f_locals
    ):
        frame = frame.f_back
    if frame is not None:
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(frame.f_locals["expected"][name])
    return model


WRONG["06.3"].append(("no / k, the weights read from the checker", weights_read_from_the_checker))
HINTS["no / k, the weights read from the checker"] = "and its / k"
HINTS["the right fraction as a percent"] = "written as a percent"


def _clip_loop(
    model, batches, k, max_norm, make_scheduler, lr=0.1, *, clip=None, window=None, update=None
):
    """The right loop, holding the scheduler when clip_grad_norm_'s norm is not finite, with its
    clip (`clip(params, max_norm)`), its window start (`window(scaler)`) and its update
    (`update(scaler)`) as given: the pieces the answers below change."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    fresh = scaler.state_dict()
    for start in range(0, len(batches), k):
        if window:
            window(scaler, fresh)
        opt.zero_grad(set_to_none=True)
        for x, y in batches[start : start + k]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
        scaler.unscale_(opt)
        norm = (clip or torch.nn.utils.clip_grad_norm_)(model.parameters(), max_norm)
        scaler.step(opt)
        update(scaler) if update else scaler.update()
        if torch.isfinite(norm):
            scheduler.step()
    return model


def scale_reset_by_update(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """One GradScaler, but update(65536.0) every window: its scale never carries (advread F3)."""
    return _clip_loop(
        model, batches, k, max_norm, make_scheduler, lr, update=lambda s: s.update(65536.0)
    )


def scale_reset_by_state_dict(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """One GradScaler, its first state_dict() loaded back at every window's start (advread F3)."""
    return _clip_loop(
        model, batches, k, max_norm, make_scheduler, lr, window=lambda s, f: s.load_state_dict(f)
    )


def clip_at_096(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Clipped to 0.96 x max_norm: within the weights' bfloat16 tolerance (advread F4)."""
    clip = lambda params, m: torch.nn.utils.clip_grad_norm_(params, 0.96 * m)  # noqa: E731
    return _clip_loop(model, batches, k, max_norm, make_scheduler, lr, clip=clip)


def clip_norm_type_1(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """clip_grad_norm_(..., norm_type=1): max_norm met in the L1 norm (advread F4)."""
    clip = lambda params, m: torch.nn.utils.clip_grad_norm_(params, m, norm_type=1)  # noqa: E731
    return _clip_loop(model, batches, k, max_norm, make_scheduler, lr, clip=clip)


def _logging_loop(model, batches, k, max_norm, make_scheduler, lr=0.1, *, forward, log, sched):
    """The right loop with its forward (`forward(x)`, autocast inside), a log after each backward
    (`log(scaler, loss, x, y)`) and its scheduler step (`sched(scheduler)`) as given."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    for start in range(0, len(batches), k):
        opt.zero_grad(set_to_none=True)
        for x, y in batches[start : start + k]:
            loss = torch.nn.functional.mse_loss(forward(x).float(), y) / k
            scaler.scale(loss).backward()
            log(scaler, loss, x, y)
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        before = scaler.get_scale()
        scaler.update()
        if scaler.get_scale() >= before:
            sched(scheduler)
    return model


def _bf16(model):
    def forward(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x)

    return forward


def _no_log(*_):
    return None


def logs_the_scaled_loss(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Logs scaler.scale(loss).item() after the backward: a scaled loss with a graph that no
    backward goes through (advread F5)."""
    log = lambda scaler, loss, x, y: scaler.scale(loss).item()  # noqa: E731
    return _logging_loop(
        model, batches, k, max_norm, make_scheduler, lr, forward=_bf16(model), log=log,
        sched=lambda s: s.step(),
    )  # fmt: skip


def scheduler_stepped_via_class(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """type(scheduler).step(scheduler): the same step, not through the instance (advread F9)."""
    return _logging_loop(
        model, batches, k, max_norm, make_scheduler, lr, forward=_bf16(model), log=_no_log,
        sched=lambda s: type(s).step(s),
    )  # fmt: skip


def autocast_first_layer_only(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Autocast around the first Linear only: the rest of the forward runs in float32 (F10)."""

    def forward(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model[0](x)
        out = out.float()
        for layer in list(model)[1:]:
            out = layer(out)
        return out

    return _logging_loop(
        model, batches, k, max_norm, make_scheduler, lr, forward=forward, log=_no_log,
        sched=lambda s: s.step(),
    )  # fmt: skip


def _no_grad_log(model, autocast):
    def log(scaler, loss, x, y):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return torch.nn.functional.mse_loss(model(x).float(), y).item()

    return log


def no_grad_log_float32(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """A no_grad logging forward in float32 after each backward (advread F12)."""
    return _logging_loop(
        model, batches, k, max_norm, make_scheduler, lr, forward=_bf16(model),
        log=_no_grad_log(model, False), sched=lambda s: s.step(),
    )  # fmt: skip


def no_grad_log_bfloat16(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """A no_grad logging forward under autocast after each backward (advread F12)."""
    return _logging_loop(
        model, batches, k, max_norm, make_scheduler, lr, forward=_bf16(model),
        log=_no_grad_log(model, True), sched=lambda s: s.step(),
    )  # fmt: skip


def consumes_batches(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Takes each window off the list with pop(0), k at a time (advread F11)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = make_scheduler(opt)
    scaler = torch.amp.GradScaler("cpu")
    while batches:
        window = [batches.pop(0) for _ in range(k)]
        opt.zero_grad(set_to_none=True)
        for x, y in window:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(x)
            scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        before = scaler.get_scale()
        scaler.update()
        if scaler.get_scale() >= before:
            scheduler.step()
    return model


RIGHT["06.3"] += [
    ("the scaled loss also logged with .item()", logs_the_scaled_loss),
    ("the scheduler stepped through its class", scheduler_stepped_via_class),
    ("batches consumed with pop(0)", consumes_batches),
    ("a no_grad logging forward in float32", no_grad_log_float32),
    ("a no_grad logging forward under autocast", no_grad_log_bfloat16),
]
WRONG["06.3"] += [
    ("one GradScaler reset by update(65536.0)", scale_reset_by_update),
    ("one GradScaler reset by load_state_dict", scale_reset_by_state_dict),
    ("clip at 0.96 x max_norm", clip_at_096),
    ("clip_grad_norm_(norm_type=1)", clip_norm_type_1),
    ("autocast around the first Linear only", autocast_first_layer_only),
]
HINTS.update({
    "one GradScaler reset by update(65536.0)": "let update() lower the scale and keep it",
    "one GradScaler reset by load_state_dict": "let update() lower the scale and keep it",
    "clip at 0.96 x max_norm": "your loop clipped to 0.048, not to max_norm",
    "clip_grad_norm_(norm_type=1)": "clipped in another norm",
    "autocast around the first Linear only": "(Linear) in float32: run the whole forward",
})  # fmt: skip


def _kept_scaler_loop(scaler, after_update=None):
    """The right loop around `scaler`; `after_update(scaler, skipped)` runs after each update()."""

    def train(model, batches, k, max_norm, make_scheduler, lr=0.1):
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        scheduler = make_scheduler(opt)
        for start in range(0, len(batches), k):
            opt.zero_grad(set_to_none=True)
            for x, y in batches[start : start + k]:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    pred = model(x)
                scaler.scale(torch.nn.functional.mse_loss(pred.float(), y) / k).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(opt)
            before = scaler.get_scale()
            scaler.update()
            skipped = scaler.get_scale() < before
            if after_update is not None:
                after_update(scaler, skipped)
            if not skipped:
                scheduler.step()
        return model

    return train


def scale_reset_after_good_windows(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """One GradScaler, its scale reset after every good window: the back-off lasts one window
    (an adversarial read: it passed a check of the window after the skip alone)."""
    fresh = torch.amp.GradScaler("cpu").state_dict()

    def reset(scaler, skipped):
        if not skipped:
            scaler.load_state_dict(fresh)

    scaler = torch.amp.GradScaler("cpu")
    return _kept_scaler_loop(scaler, reset)(model, batches, k, max_norm, make_scheduler, lr)


def scaler_growing_every_window(model, batches, k, max_norm, make_scheduler, lr=0.1):
    """Right: GradScaler(growth_interval=1), whose scale doubles after every good window."""
    scaler = torch.amp.GradScaler("cpu", growth_interval=1)
    return _kept_scaler_loop(scaler)(model, batches, k, max_norm, make_scheduler, lr)


WRONG["06.3"].append(("the scale reset after every good window", scale_reset_after_good_windows))
HINTS["the scale reset after every good window"] = "never reset it"
RIGHT["06.3"].append(("GradScaler(growth_interval=1)", scaler_growing_every_window))
