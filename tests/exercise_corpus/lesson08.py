"""Lesson 08: right, wrong and unanswered answers for its exercises (see __init__.py)."""

from itertools import islice

import numpy as np
import torch
import torch.nn.functional as F

import accumlab as al


# --- 08.1: the mystery loop fixed, and fixes that are not --------------------------------------
def _fixed_after_step(model, optimizer, batches, k):
    """The mystery loop with the zero_grad() it lacks, right after the step."""
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def _fixed_at_window_start(model, optimizer, batches, k):
    """Zeroed as each window begins, by the module, to zeros (not None): the same updates."""
    for i, (x, y) in enumerate(batches):
        if i % k == 0:
            model.zero_grad(set_to_none=False)
        window = min(k, len(batches) - (i - i % k))
        (F.mse_loss(model(x), y) / np.int64(window)).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()


class _FixedByHand:
    """A class whose call trains one epoch; .grad set to None by hand after each step."""

    def __call__(self, model, optimizer, batches, k):
        for i, (x, y) in enumerate(batches):
            window = min(k, len(batches) - (i - i % k))
            (F.mse_loss(model(x), y) / window).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                optimizer.step()
                for p in model.parameters():
                    p.grad = None


def _mystery_as_shown(model, optimizer, batches, k):
    """The mystery loop typed out unchanged."""
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()


def _zeroed_before_step(model, optimizer, batches, k):
    """zero_grad() added, but between the last backward and the step."""
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        (F.mse_loss(model(x), y) / window).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.zero_grad()
            optimizer.step()


def _zeroed_every_micro_batch(model, optimizer, batches, k):
    """zero_grad() at the top of every iteration: each step sees its last micro-batch only."""
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        window = min(k, len(batches) - (i - i % k))
        (F.mse_loss(model(x), y) / window).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()


def _zeroed_once_per_epoch(model, optimizer, batches, k):
    """zero_grad() once, before the epoch: the windows still carry into each other."""
    optimizer.zero_grad()
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        (F.mse_loss(model(x), y) / window).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()


def _windows_typed_in(model, optimizer, batches, k):
    """Fixed, but with the regression setup's windows (4, 4, 2) typed in for the division."""
    for i, (x, y) in enumerate(batches):
        (F.mse_loss(model(x), y) / (4 if i < 8 else 2)).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def _the_gallerys_correct_loop(model, optimizer, batches, k):
    """The lesson's correct_loop, called instead of written."""
    al.audit.catalogue_loop("correct_loop").fn(model, optimizer, batches, k)


def _stub_fixed_loop(model, optimizer, batches, k):
    """Your fix of the mystery loop: one epoch."""
    ...


# --- 08.2: other right loops (micro-batches of 3 samples, each epoch's last of 1) -------------------
def _weighted_means(model, optimizer, batches, k):
    """Each micro-batch's MEAN loss times its share of the window's samples: the same weights as a
    summed loss over the window's count, computed another way."""
    for i, (x, y) in enumerate(batches):
        start = i - i % k
        window = batches[start : start + k]
        samples = sum(t.shape[0] for _, t in window)
        loss = F.mse_loss(model(x), y)
        (loss * y.shape[0] / samples).backward()
        if i + 1 == start + len(window):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)


def _per_sample_losses(model, optimizer, batches, k):
    """reduction='none', summed by hand, the window's count taken up front (numpy's int)."""
    it = iter(batches)
    while window := list(islice(it, k)):
        samples = np.int64(sum(len(y) for _, y in window))
        for x, y in window:
            per_sample = F.mse_loss(model(x), y, reduction="none")
            (per_sample.sum() / float(samples)).backward()
        optimizer.step()
        optimizer.zero_grad()


def _autograd_grad(model, optimizer, batches, k):
    """torch.autograd.grad per micro-batch, summed by hand and set as .grad: another algorithm."""
    params = list(model.parameters())
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        samples = sum(len(y) for _, y in window)
        total = [torch.zeros_like(p) for p in params]
        for x, y in window:
            loss = F.mse_loss(model(x), y, reduction="sum") / samples
            total = [t + g for t, g in zip(total, torch.autograd.grad(loss, params), strict=True)]
        for p, t in zip(params, total, strict=True):
            p.grad = t
        optimizer.step()
        optimizer.zero_grad()


# --- 08.2: wrong loops ----------------------------------------------------------------------------
def _hidden_full_batch(model, optimizer, batches, k):
    """Games the hooks: a decoy backward per micro-batch adds 0, the window's gradient comes from
    one big-batch backward through model.forward, which no hook sees."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        for x, _ in window:
            (model(x).sum() * 0).backward()
        x, y = torch.cat([x for x, _ in window]), torch.cat([y for _, y in window])
        F.mse_loss(model.forward(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()


def _starting_code(model, optimizer, batches, k):
    """The cell's starting code as handed out: the mean of micro-batch means."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        for x, y in window:
            loss = F.mse_loss(model(x), y)
            (loss / len(window)).backward()
        optimizer.step()
        optimizer.zero_grad()


def _divides_by_full_micro_batches(model, optimizer, batches, k):
    """A common mistake: the window's count taken as micro-batches × 3, the last one's 1 ignored."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        for x, y in window:
            loss = F.mse_loss(model(x), y, reduction="sum")
            (loss / (len(window) * len(batches[0][1]))).backward()
        optimizer.step()
        optimizer.zero_grad()


def _copies_the_reference(model, optimizer, batches, k):
    """Skips accumulation: accumlab's full-batch gradient of each window copied into .grad."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        joined = al.Data(torch.cat([x for x, _ in window]), torch.cat([y for _, y in window]))
        grads = al.full_batch_grads(model, joined)
        for name, p in model.named_parameters():
            p.grad = grads[name].clone()
        optimizer.step()
        optimizer.zero_grad()


def _one_forward_per_window(model, optimizer, batches, k):
    """Skips accumulation: the window's micro-batches concatenated into one forward."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        x = torch.cat([x for x, _ in window])
        y = torch.cat([y for _, y in window])
        F.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()


def _one_backward_per_window(model, optimizer, batches, k):
    """Skips accumulation: a forward per micro-batch, but every graph of the window kept alive for
    one backward (the big batch's memory)."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        out = torch.cat([model(x) for x, _ in window])
        F.mse_loss(out, torch.cat([y for _, y in window])).backward()
        optimizer.step()
        optimizer.zero_grad()


# --- 08.3: other right full loops -----------------------------------------------------------------
def _window_first(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """Window by window, the loss summed over samples and divided by the window's sample count."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        samples = sum(y.numel() for _, y in window)
        for x, y in window:
            loss = F.mse_loss(model(x), y, reduction="sum") / samples
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()


class _Trainer:
    """A class: one instance per audit, called once per epoch; the window count reset each epoch."""

    def __call__(self, model, optimizer, batches, k, *, scaler, scheduler, max_norm):
        self.done = 0
        for i, (x, y) in enumerate(batches, 1):
            size = min(k, len(batches) - self.done)
            scaler.scale(F.mse_loss(model(x), y) / size).backward()
            if i % k == 0 or i == len(batches):
                self.done = i
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad()


def _clipped_by_hand(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """Clipping computed by hand, without clip_grad_norm_'s 1e-6 epsilon."""
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        scaler.scale(F.mse_loss(model(x), y) / window).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.unscale_(optimizer)
            total = float(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).norm())
            for p in model.parameters():
                p.grad *= min(1.0, max_norm / total)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            optimizer.zero_grad()


def _cuda_autocast(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """The GPU recipe as written for CUDA: on a CPU-only machine PyTorch switches autocast off."""
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        with torch.autocast("cuda", dtype=torch.float16):
            prediction = model(x)
        scaler.scale(F.mse_loss(prediction.to(y.dtype), y) / window).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            optimizer.zero_grad()


# --- 08.3: wrong full loops -----------------------------------------------------------------------
def _hidden_full_batch_full(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """Games the hooks as in 08.2: decoys through model(x), the real gradient through forward()."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        for x, _ in window:
            (model(x).sum() * 0).backward()
        x, y = torch.cat([x for x, _ in window]), torch.cat([y for _, y in window])
        scaler.scale(F.mse_loss(model.forward(x), y)).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad()


def _undivided_under_clipping(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """A common mistake clipping hides: no division at all, the documented GradScaler order."""
    for i, (x, y) in enumerate(batches):
        scaler.scale(F.mse_loss(model(x), y)).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            optimizer.zero_grad()


def _starting_point(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """The capstone's buggy starting point (section 7)."""
    for i, (x, y) in enumerate(batches):
        loss = F.mse_loss(model(x), y) / k
        scaler.scale(loss).backward()
        scheduler.step()
        if (i + 1) % k == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


def _without_the_scaler(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """Skips the technique: right accumulation, clipping and schedule, the GradScaler unused."""
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        (F.mse_loss(model(x), y) / window).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _optimizer_step(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """Every call of the documented order but scaler.step: no inf/NaN check."""
    al.audit.catalogue_loop("scaler_step_skipped").fn(
        model, optimizer, batches, k, scaler=scaler, max_norm=max_norm
    )
    for _ in range((len(batches) + k - 1) // k):
        scheduler.step()


def _one_backward_per_window_full(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """The documented GradScaler order, but every graph of the window alive for one backward."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        out = torch.cat([model(x) for x, _ in window])
        scaler.scale(F.mse_loss(out, torch.cat([y for _, y in window]))).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        optimizer.zero_grad()


def _copies_the_trajectory(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """accumlab's own AMP loop trains, its weights copied in: nothing accumulated here."""
    data = al.Data(torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches]))
    trace = al.precision.amp_train(
        model, data, micro_batch_size=len(batches[0][0]), accumulation_steps=k, max_norm=max_norm
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(trace.params[-1][name])


# --- stubs, as the notebook hands them out ----------------------------------------------------------
def _stub_sample_loop(model, optimizer, batches, k): ...


def _stub_train_epoch(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """Your loop: one epoch, the documented GradScaler order, clipping, a scheduler."""
    ...


RIGHT: dict = {
    "08.1": [
        ("zero_grad() after the step", _fixed_after_step),
        (
            "model.zero_grad(set_to_none=False) as each window begins, np.int64",
            _fixed_at_window_start,
        ),
        ("a class, .grad = None by hand", _FixedByHand()),
    ],
    "08.2": [
        ("mean loss times the sample share", _weighted_means),
        ("per-sample losses summed by hand, np.int64 count", _per_sample_losses),
        ("torch.autograd.grad per micro-batch, .grad set by hand", _autograd_grad),
    ],
    "08.3": [
        ("window first, summed over samples", _window_first),
        ("a class called once per epoch", _Trainer),
        ("clipping by hand, no epsilon", _clipped_by_hand),
        ("torch.autocast('cuda'), switched off on a CPU", _cuda_autocast),
    ],
}
WRONG: dict = {
    "08.1": [
        ("the mystery loop typed out unchanged", _mystery_as_shown),
        ("zero_grad() before the step", _zeroed_before_step),
        ("zero_grad() every micro-batch", _zeroed_every_micro_batch),
        ("zero_grad() once per epoch", _zeroed_once_per_epoch),
        ("the first setup's windows typed in", _windows_typed_in),
        ("the gallery's correct_loop called", _the_gallerys_correct_loop),
        ("the old exercise's code as a string", "GRADS_NEVER_ZEROED"),
    ],
    "08.2": [
        ("the cell's starting code (mean of means)", _starting_code),
        ("the window's count as micro-batches × 3", _divides_by_full_micro_batches),
        ("accumlab's full-batch gradient copied in", _copies_the_reference),
        ("one forward per window", _one_forward_per_window),
        ("one backward per window, every graph alive", _one_backward_per_window),
        ("decoys through model(x), the gradient through model.forward", _hidden_full_batch),
    ],
    "08.3": [
        ("the capstone's starting point", _starting_point),
        ("the GradScaler never used", _without_the_scaler),
        ("optimizer.step() for scaler.step", _optimizer_step),
        ("accumlab's AMP loop, weights copied in", _copies_the_trajectory),
        ("one backward per window, every graph alive", _one_backward_per_window_full),
        ("decoys through model(x), the gradient through model.forward", _hidden_full_batch_full),
        ("no division, hidden by clipping", _undivided_under_clipping),
    ],
}
STUBS: dict = {
    "08.1": [("the exercise cell's stub", _stub_fixed_loop), ("answer = None", None)],
    "08.2": [("a function with ... for a body", _stub_sample_loop)],
    "08.3": [("the exercise cell's stub", _stub_train_epoch)],
}


def _twin_big_batch(model, batches, start, k):
    """The window as one big batch on a copy of the model (hooks and all)."""
    import copy

    window = batches[start : start + k]
    twin = copy.deepcopy(model)
    x = torch.cat([x for x, _ in window])
    y = torch.cat([y for _, y in window])
    return twin, window, F.mse_loss(twin(x), y)


def _twin_with_decoys(model, optimizer, batches, k):
    """Zero-loss decoy backwards on the model; the big batch on a copy, its .grad copied in."""
    for start in range(0, len(batches), k):
        twin, window, loss = _twin_big_batch(model, batches, start, k)
        for x, _ in window:
            (model(x).sum() * 0).backward()
        loss.backward()
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            p.grad = q.grad
        optimizer.step()
        optimizer.zero_grad()


def _twin_with_decoys_full(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """The capstone's calls around the same cheat: the copy's gradient scaled and copied in."""
    for start in range(0, len(batches), k):
        twin, window, loss = _twin_big_batch(model, batches, start, k)
        for x, _ in window:
            scaler.scale(model(x).sum() * 0).backward()
        scaler.scale(loss).backward()
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            p.grad = q.grad
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        scheduler.step()


def _copies_the_reference_behind_a_runner(model, optimizer, batches, k):
    """al.full_batch_grads handed to accumlab's own call_within, behind decoy backwards."""
    from accumlab.exercises._limit import call_within

    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        data = al.Data(torch.cat([x for x, _ in window]), torch.cat([y for _, y in window]))
        grads = call_within(30, al.full_batch_grads, model, data)
        for x, _ in window:
            (model(x).sum() * 0).backward()
        for n, p in model.named_parameters():
            p.grad = grads[n].clone()
        optimizer.step()
        optimizer.zero_grad()


WRONG["08.2"] += [
    ("the big batch on a copy, decoys, .grad copied in", _twin_with_decoys),
    ("al.full_batch_grads behind call_within, decoys", _copies_the_reference_behind_a_runner),
]
WRONG["08.3"].append(("the big batch on a copy, decoys, .grad copied in", _twin_with_decoys_full))
HINTS = {
    "the big batch on a copy, decoys, .grad copied in": "not from your loop's accumulation",
    "al.full_batch_grads behind call_within, decoys": "write it yourself",
}


def _buffered_outside_grad(model, optimizer, batches, k):
    """Right: each pass's .grad moved into a buffer (p.grad = None), set back before the step."""
    params = list(model.parameters())
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        n = sum(len(y) for _, y in window)
        buf = [torch.zeros_like(p) for p in params]
        for x, y in window:
            (F.mse_loss(model(x), y, reduction="sum") / n).backward()
            for b, p in zip(buf, params, strict=True):
                b += p.grad
                p.grad = None
        for b, p in zip(buf, params, strict=True):
            p.grad = b
        optimizer.step()
        optimizer.zero_grad()


def _online_mean(model, optimizer, batches, k):
    """Right: .grad kept as the running mean over the samples seen so far in the window."""
    for start in range(0, len(batches), k):
        seen = 0
        for x, y in batches[start : start + k]:
            for p in model.parameters():
                if p.grad is not None:
                    p.grad *= seen / (seen + len(y))
            (F.mse_loss(model(x), y, reduction="sum") / (seen + len(y))).backward()
            seen += len(y)
        optimizer.step()
        optimizer.zero_grad()


def _retained_decoys(model, optimizer, batches, k):
    """Every graph kept for one backward, each first reached by a tiny retain_graph decoy."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        n = sum(len(y) for _, y in window)
        losses = []
        for x, y in window:
            loss = F.mse_loss(model(x), y, reduction="sum")
            (loss * 1e-13).backward(retain_graph=True)
            losses.append(loss)
        (sum(losses) / n).backward()
        optimizer.step()
        optimizer.zero_grad()


def _a_hundredth_then_written(model, optimizer, batches, k):
    """Honest passes at 1/99 of their weight, then a copy's big-batch gradient written in."""
    for start in range(0, len(batches), k):
        twin, window, loss = _twin_big_batch(model, batches, start, k)
        n = sum(len(y) for _, y in window)
        for x, y in window:
            (F.mse_loss(model(x), y, reduction="sum") / n / 99).backward()
        loss.backward()
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            p.grad = q.grad.clone()
        optimizer.step()
        optimizer.zero_grad()


RIGHT["08.2"] += [
    ("each pass moved into a buffer outside .grad", _buffered_outside_grad),
    ("a running mean kept in .grad", _online_mean),
]
WRONG["08.2"] += [
    ("every graph kept for one backward, behind retain_graph decoys", _retained_decoys),
    ("passes at 1/99 weight, a copy's gradient written in", _a_hundredth_then_written),
]
HINTS.update(
    {
        "every graph kept for one backward, behind retain_graph decoys": "alive together",
        "passes at 1/99 weight, a copy's gradient written in": "more than k / the window",
    }
)


def _retained_then_each(model, optimizer, batches, k):
    """Every graph kept behind a tiny retain_graph decoy, then back-propagated one by one after
    the window's last forward: the big batch's memory."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        n = sum(len(y) for _, y in window)
        losses = []
        for x, y in window:
            loss = F.mse_loss(model(x), y, reduction="sum")
            (loss * 1e-13).backward(retain_graph=True)
            losses.append(loss)
        for loss in losses:
            (loss / n).backward()
        optimizer.step()
        optimizer.zero_grad()


def _passes_at_one_kth_then_written(model, optimizer, batches, k):
    """Passes carrying 1/len(window) of their share, a copy's gradient written over them."""
    for start in range(0, len(batches), k):
        twin, window, loss = _twin_big_batch(model, batches, start, k)
        n = sum(len(y) for _, y in window)
        for x, y in window:
            (F.mse_loss(model(x), y, reduction="sum") / n / len(window)).backward()
        loss.backward()
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            p.grad = q.grad.clone()
        optimizer.step()
        optimizer.zero_grad()


def _a_backward_per_sample(model, optimizer, batches, k):
    """Right: one backward per sample through the micro-batch's one graph."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        n = sum(len(y) for _, y in window)
        for x, y in window:
            per = F.mse_loss(model(x), y, reduction="none").sum(dim=tuple(range(1, y.dim())))
            for j, loss in enumerate(per):
                (loss / n).backward(retain_graph=j < len(per) - 1)
        optimizer.step()
        optimizer.zero_grad()


RIGHT["08.2"].append(("a backward per sample", _a_backward_per_sample))
WRONG["08.2"] += [
    ("graphs kept behind decoys, back-propagated one by one", _retained_then_each),
    ("passes at 1/len(window), a copy's gradient written in", _passes_at_one_kth_then_written),
]
HINTS.update(
    {
        "graphs kept behind decoys, back-propagated one by one": "alive together",
        "passes at 1/len(window), a copy's gradient written in": "more than k / the window",
    }
)


def _halves(model, optimizer, batches, k):
    """Each micro-batch split in two forwards, each half's summed loss over the window's count:
    the same gradient, with 2k passes per step."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        n = sum(len(y) for _, y in window)
        for x, y in window:
            half = (len(y) + 1) // 2
            for rows in (slice(0, half), slice(half, None)):
                if len(y[rows]):
                    (F.mse_loss(model(x[rows]), y[rows], reduction="sum") / n).backward()
        optimizer.step()
        optimizer.zero_grad()


def _drops_last_row(model, optimizer, batches, k):
    """Each micro-batch's last row left out (as x[:-1] would): those samples never count."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        n = sum(len(y) - 1 for _, y in window) or 1
        for x, y in window:
            if len(y) > 1:
                (F.mse_loss(model(x[:-1]), y[:-1], reduction="sum") / n).backward()
        optimizer.step()
        optimizer.zero_grad()


RIGHT["08.2"].append(("each micro-batch in two forwards", _halves))
WRONG["08.2"].append(("each micro-batch's last row left out", _drops_last_row))


def _reversed_window(model, optimizer, batches, k):
    """Each window's micro-batches run last to first: the same sum in .grad."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        n = sum(len(y) for _, y in window)
        for x, y in reversed(window):
            (F.mse_loss(model(x), y, reduction="sum") / n).backward()
        optimizer.step()
        optimizer.zero_grad()


def _counts_typed_in(model, optimizer, batches, k):
    """The uneven setup's window counts typed in (12 samples, 3 + 1 in the last window)."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        n = 4 if len(window) < k else 3 * k
        for x, y in window:
            (F.mse_loss(model(x), y, reduction="sum") / n).backward()
        optimizer.step()
        optimizer.zero_grad()


RIGHT["08.2"].append(("each window's micro-batches in reverse order", _reversed_window))
WRONG["08.2"].append(("the first setup's window counts typed in", _counts_typed_in))
HINTS["the first setup's window counts typed in"] = "data=al.regression_data("


def _capstone_sizes_typed_in(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    """The capstone with the first setup's window sizes typed in (4, 4 and 2)."""
    for i, (x, y) in enumerate(batches):
        loss = F.mse_loss(model(x), y) / (2 if i >= 8 else 4)
        scaler.scale(loss).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            optimizer.zero_grad()


WRONG["08.3"].append(("the first setup's window sizes typed in", _capstone_sizes_typed_in))
HINTS["the first setup's window sizes typed in"] = "data=al.regression_data("


def _last_windows_listed_per_k(model, optimizer, batches, k):
    """08.1 with the last window's size listed for every k, for the first setup's 10 micro-batches."""
    last = {2: 2, 3: 1, 4: 2, 5: 5, 6: 4, 7: 3, 8: 2}
    full = (len(batches) // k) * k
    for i, (x, y) in enumerate(batches):
        (F.mse_loss(model(x), y) / (k if i < full else last[k])).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def _last_micro_batch_from_40(model, optimizer, batches, k):
    """08.2 with the data's 40 samples typed in for the last micro-batch's size."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        size = len(window[0][0])
        last = 40 % size
        end = start + len(window) == len(batches) and last
        n = size * len(window) - (size - last if end else 0)
        for x, y in window:
            (F.mse_loss(model(x), y) * len(x) / n).backward()
        optimizer.step()
        optimizer.zero_grad()


WRONG["08.1"].append(("the last window listed per k", _last_windows_listed_per_k))
HINTS["the last window listed per k"] = "data=al.regression_data("
WRONG["08.2"].append(("the last micro-batch from 40 samples typed in", _last_micro_batch_from_40))
HINTS["the last micro-batch from 40 samples typed in"] = "data=al.regression_data("


def _one_forward_per_window(model, optimizer, batches, k):
    """Each window's micro-batches concatenated into one forward: the big batch, stepped once per
    window."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        x, y = torch.cat([b[0] for b in window]), torch.cat([b[1] for b in window])
        optimizer.zero_grad()
        F.mse_loss(model(x), y).backward()
        optimizer.step()


WRONG["08.1"].append(("one forward per window", _one_forward_per_window))
HINTS["one forward per window"] = "the big batch, not accumulation"


def _a_forward_per_sample(model, optimizer, batches, k):
    """Right: one forward and backward per sample, each over the window's count."""
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        n = sum(len(y) for _, y in window)
        for x, y in window:
            for row in range(len(y)):
                rows = slice(row, row + 1)
                (F.mse_loss(model(x[rows]), y[rows], reduction="sum") / n).backward()
        optimizer.step()
        optimizer.zero_grad()


RIGHT["08.2"].append(("a forward per sample", _a_forward_per_sample))
