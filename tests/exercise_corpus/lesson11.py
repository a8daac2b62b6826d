"""Lesson 11: right, wrong and unanswered answers for its exercises (see __init__.py)."""

from contextlib import nullcontext
from fractions import Fraction

import numpy as np
import torch
import torch.nn.functional as F

import accumlab as al

IGNORE = al.IGNORE_INDEX


def _summed_loss(outputs, labels, num_items_in_batch=None):
    """Another right 11.2: log-probabilities gathered by hand, summed, ÷ the window's count."""
    logp = outputs["logits"].log_softmax(-1)
    real = labels != IGNORE
    picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked * real).sum() / num_items_in_batch


def _sum_not_divided(outputs, labels, num_items_in_batch=None):
    logits = outputs["logits"]
    return F.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="sum"
    )


def _per_micro_batch_tokens(outputs, labels, num_items_in_batch=None):
    """Divides by this micro-batch's tokens: the mean of means again."""
    logits = outputs["logits"]
    total = F.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="sum"
    )
    return total / (labels != IGNORE).sum()


def _float32_attribute_access(outputs, labels, num_items_in_batch=None):
    """Another right 11.2: `outputs.logits`, computed in float32 (round-off ~1e-7)."""
    logits = outputs.logits.float()
    total = F.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="sum"
    )
    return total / num_items_in_batch


def _mean_over_window_count(outputs, labels, num_items_in_batch=None):
    """The micro-batch MEAN divided by the window's count: about 10× too small."""
    logits = outputs["logits"]
    mean = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)
    return mean / num_items_in_batch


def _padding_as_class_0(outputs, labels, num_items_in_batch=None):
    """Padding counted as token 0 (no ignore_index), ÷ the window's real tokens."""
    logits = outputs["logits"]
    total = F.cross_entropy(logits.flatten(0, 1), labels.clamp(min=0).flatten(), reduction="sum")
    return total / num_items_in_batch


def _token_sum(model, x, y):
    return F.cross_entropy(
        model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE, reduction="sum"
    )


def _window_tokens(loader, k, as_tensor=False):
    counts = [(y != IGNORE).sum() for _, y in loader]  # a pass over the labels only
    tokens = [sum(counts[i : i + k]) for i in range(0, len(counts), k)]
    return tokens if as_tensor else [int(t) for t in tokens]


def _exact_with_tensor_count(accelerator, model, optimizer, scheduler, loader, k):
    """Counted in a first pass, trained in a second: exact unless the passes' orders differ."""
    steps = accelerator.gradient_accumulation_steps
    tokens = _window_tokens(loader, steps, as_tensor=True)
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate(model):
            accelerator.backward(_token_sum(model, x, y) * steps / tokens[i // steps])
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _docs_recipe_without_accumulate(accelerator, model, optimizer, scheduler, loader, k):
    """The lesson's docs' recipe: exact, but every backward outside accumulate()."""
    batches = iter(loader)
    remaining = len(loader)
    while remaining:
        window = [next(batches) for _ in range(min(k, remaining))]
        remaining -= len(window)
        tokens = sum(int((y != IGNORE).sum()) for _, y in window)
        for x, y in window:
            accelerator.backward(_token_sum(model, x, y) * k / tokens)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()


def _prefetch_inside_accumulate(accelerator, model, optimizer, scheduler, loader, k):
    """The trap: windows prefetched with next(), then accumulate(): steps after 4, 8, 9, 10."""
    batches = iter(loader)
    remaining = len(loader)
    while remaining:
        window = [next(batches) for _ in range(min(k, remaining))]
        remaining -= len(window)
        tokens = sum(int((y != IGNORE).sum()) for _, y in window)
        for x, y in window:
            with accelerator.accumulate(model):
                accelerator.backward(_token_sum(model, x, y) * k / tokens)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()


def _plain_backward(accelerator, model, optimizer, scheduler, loader, k):
    """Exact numbers without Accelerate's backward: loss.backward() directly."""
    tokens = _window_tokens(loader, k)
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate(model):
            (_token_sum(model, x, y) / tokens[i // k]).backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _zero_then_plain_backward(accelerator, model, optimizer, scheduler, loader, k):
    """Gaming the call count: accelerator.backward(0 × loss), then loss.backward() itself."""
    tokens = _window_tokens(loader, k)
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate(model):
            loss = _token_sum(model, x, y) / tokens[i // k]
            accelerator.backward(0 * loss, retain_graph=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _one_backward_per_window_padded(accelerator, model, optimizer, scheduler, loader, k):
    """Gaming the call count: the window's whole loss in its last call, zero losses before."""
    batches = list(loader)
    tokens = _window_tokens(loader, k)
    for w, start in enumerate(range(0, len(batches), k)):
        window = batches[start : start + k]
        losses = [_token_sum(model, x, y) for x, y in window]
        for j in range(len(window)):
            with accelerator.accumulate(model):
                last = j == len(window) - 1
                if last:
                    accelerator.backward(sum(losses) * k / tokens[w])
                else:
                    accelerator.backward(0 * losses[j], retain_graph=True)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()


def _forgets_times_k(accelerator, model, optimizer, scheduler, loader, k):
    """÷ window tokens, but accelerator.backward divides by k once more."""
    tokens = _window_tokens(loader, k)
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate(model):
            accelerator.backward(_token_sum(model, x, y) / tokens[i // k])
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _scheduler_every_micro_batch(accelerator, model, optimizer, scheduler, loader, k):
    """Exact gradients, but the torch scheduler inside the prepared one stepped every batch."""
    tokens = _window_tokens(loader, k)
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate(model):
            accelerator.backward(_token_sum(model, x, y) * k / tokens[i // k])
            optimizer.step()
            scheduler.scheduler.step()  # the unwrapped scheduler: no sync check
            optimizer.zero_grad()


def _scheduler_never_stepped(accelerator, model, optimizer, scheduler, loader, k):
    tokens = _window_tokens(loader, k)
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate(model):
            accelerator.backward(_token_sum(model, x, y) * k / tokens[i // k])
            optimizer.step()
            optimizer.zero_grad()


def _exact_with_numpy_counts(accelerator, model, optimizer, scheduler, loader, k):
    """Two passes again: np.int64 window counts, the loss in float32, forward inside."""
    counts = np.array([int((y != IGNORE).sum()) for _, y in loader])
    tokens = np.add.reduceat(counts, np.arange(0, len(counts), k))
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate(model):
            loss = _token_sum(model, x, y).float()
            accelerator.backward(loss * k / tokens[i // k])
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _forward_outside_accumulate(accelerator, model, optimizer, scheduler, loader, k):
    """Exact on one process, but the forward runs before accumulate(): DDP would all-reduce."""
    tokens = _window_tokens(loader, k)
    for i, (x, y) in enumerate(loader):
        loss = _token_sum(model, x, y)
        with accelerator.accumulate(model):
            accelerator.backward(loss * k / tokens[i // k])
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _accumulate_without_model(accelerator, model, optimizer, scheduler, loader, k):
    """Exact on one process, but accumulate() is not given the model: no no_sync is entered."""
    tokens = _window_tokens(loader, k)
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate():
            accelerator.backward(_token_sum(model, x, y) * k / tokens[i // k])
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _num_steps_set_to_one(accelerator, model, optimizer, scheduler, loader, k):
    """accumulate() told to sync every micro-batch, the caller stepping once per window."""
    accelerator.gradient_state.plugin_kwargs["num_steps"] = 1
    tokens = _window_tokens(loader, k)
    batches = list(loader)
    for i, (x, y) in enumerate(batches):
        with accelerator.accumulate(model):
            accelerator.backward(_token_sum(model, x, y) / tokens[i // k])  # no ÷ k left to undo
        if i % k == k - 1 or i == len(batches) - 1:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _sync_forced_every_micro_batch(accelerator, model, optimizer, scheduler, loader, k):
    """sync_gradients set True inside accumulate(): every micro-batch would be all-reduced."""
    tokens = _window_tokens(loader, k)
    batches = list(loader)
    for i, (x, y) in enumerate(batches):
        with accelerator.accumulate(model):
            accelerator.gradient_state._set_sync_gradients(True)
            accelerator.backward(_token_sum(model, x, y) * k / tokens[i // k])
        if i % k == k - 1 or i == len(batches) - 1:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _zero_grad_before_step(accelerator, model, optimizer, scheduler, loader, k):
    """The gradients cleared just before the step: every step uses a zero gradient."""
    tokens = _window_tokens(loader, k)
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate(model):
            accelerator.backward(_token_sum(model, x, y) * k / tokens[i // k])
            optimizer.zero_grad()
            optimizer.step()
            scheduler.step()


def _one_pass_tensor_counts(accelerator, model, optimizer, scheduler, loader, k):
    """Right: each window's batches taken first and counted as 0-d tensors, k read from the
    Accelerator; the last window's count is the epoch's total (a first pass over the labels:
    the same in any order) minus the others', its batches fetched as it trains."""
    steps = accelerator.gradient_accumulation_steps
    total = sum((y != IGNORE).sum() for _, y in loader)
    batches, starts = iter(loader), range(0, len(loader), steps)
    for start in starts:
        if start != starts[-1]:
            window = [next(batches) for _ in range(steps)]
            tokens = sum((y != IGNORE).sum() for _, y in window)
            total = total - tokens
        else:
            window, tokens = batches, total
        for x, y in window:
            with accelerator.accumulate(model):
                accelerator.backward(_token_sum(model, x, y) * steps / tokens)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()


def _one_pass_dataset_total(accelerator, model, optimizer, scheduler, loader, k):
    """Right: as above, the total read from loader.dataset's labels, the loss in float32."""
    left = sum(int((y != IGNORE).sum()) for _, y in loader.dataset)
    batches, windows = iter(loader), -(-len(loader) // k)
    for w in range(windows):
        window = [next(batches) for _ in range(k)] if w < windows - 1 else batches
        tokens = sum(int((y != IGNORE).sum()) for _, y in window) if w < windows - 1 else left
        left -= tokens
        for x, y in window:
            with accelerator.accumulate(model):
                accelerator.backward(_token_sum(model, x, y).float() * k / tokens)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()


def _window_under_no_sync(accelerator, model, optimizer, scheduler, loader, k):
    """The right loop with each window under one accelerator.no_sync(model): on DDP the last
    micro-batch is not all-reduced either, so the processes step with different gradients."""
    total = sum(int((y != IGNORE).sum()) for _, y in loader)
    batches, starts = iter(loader), range(0, len(loader), k)
    for start in starts:
        if start != starts[-1]:
            window = [next(batches) for _ in range(k)]
            tokens = sum(int((y != IGNORE).sum()) for _, y in window)
            total -= tokens
        else:
            window, tokens = batches, total
        with accelerator.no_sync(model):
            for x, y in window:
                with accelerator.accumulate(model):
                    accelerator.backward(_token_sum(model, x, y) * k / tokens)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()


def _window_under_class_no_sync(accelerator, model, optimizer, scheduler, loader, k):
    """The same windows under `no_sync` looked up on the class, past any instance attribute."""
    total = sum(int((y != IGNORE).sum()) for _, y in loader)
    batches, starts = iter(loader), range(0, len(loader), k)
    for start in starts:
        if start != starts[-1]:
            window = [next(batches) for _ in range(k)]
            tokens = sum(int((y != IGNORE).sum()) for _, y in window)
            total -= tokens
        else:
            window, tokens = batches, total
        with type(accelerator).no_sync(accelerator, model):
            for x, y in window:
                with accelerator.accumulate(model):
                    accelerator.backward(_token_sum(model, x, y) * k / tokens)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()


def _steered_inner_accumulate(accelerator, model, optimizer, scheduler, loader, k):
    """accumulate() inside accumulate(), the inner one steered to sync on each window's last
    micro-batch: the outer one, entered with sync_gradients False, holds no_sync open."""
    batches = list(loader)
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        tokens = sum(int((y != IGNORE).sum()) for _, y in window)
        for j, (x, y) in enumerate(window):
            with accelerator.accumulate(model):
                accelerator.gradient_state.plugin_kwargs["sync_with_dataloader"] = False
                accelerator.step = k - 1 if j == len(window) - 1 else 0
                with accelerator.accumulate(model):
                    accelerator.backward(_token_sum(model, x, y) * k / tokens)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()


def _no_sync_before_the_last(accelerator, model, optimizer, scheduler, loader, k):
    """Right: as the one-pass answer, a full window's first k - 1 micro-batches also under
    accelerator.no_sync(model), which accumulate() enters for them anyway."""
    total = sum(int((y != IGNORE).sum()) for _, y in loader)
    batches, starts = iter(loader), range(0, len(loader), k)
    for start in starts:
        if start != starts[-1]:
            window = [next(batches) for _ in range(k)]
            tokens = sum(int((y != IGNORE).sum()) for _, y in window)
            total -= tokens
        else:  # fetched as it trains, so which one is last is not known ahead
            window, tokens = batches, total
        for j, (x, y) in enumerate(window):
            before_last = start != starts[-1] and j < k - 1
            with accelerator.no_sync(model) if before_last else nullcontext():
                with accelerator.accumulate(model):
                    accelerator.backward(_token_sum(model, x, y) * k / tokens)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()


def _stub_loss(outputs, labels, num_items_in_batch=None):
    # the usual mean loss, to change
    ...


def _stub_epoch(accelerator, model, optimizer, scheduler, loader, k):
    # the loop of Accelerate's docs, to change
    ...


RIGHT = {
    "11.1": [
        ("numpy and 3 digits", (np.int64(2), np.float64(0.429))),
        ("tensors and a fraction", (torch.tensor(2), Fraction(3, 7))),
    ],
    "11.2": [
        ("log-probabilities gathered by hand", _summed_loss),
        ("float32, outputs.logits", _float32_attribute_access),
    ],
    "11.3": [
        ("one pass, tensor counts, k from the Accelerator", _one_pass_tensor_counts),
        ("one pass, float32 loss, total from loader.dataset", _one_pass_dataset_total),
        ("no_sync around all but a window's last", _no_sync_before_the_last),
    ],
}
WRONG = {
    "11.1": [
        ("k = 4's factor", (2, 0.5)),
        ("k = 6's factor, also k = 3's error in the lesson", (2, 2 / 3)),
        ("remainder never stepped", (1, 1.0)),
        ("the error, not the factor", (2, 4 / 7)),
        ("a step count that is not whole", (2.5, 0.429)),
    ],
    "11.2": [
        ("sum, not divided", _sum_not_divided),
        ("÷ micro-batch tokens", _per_micro_batch_tokens),
        ("mean ÷ window count", _mean_over_window_count),
        ("padding as class 0", _padding_as_class_0),
    ],
    "11.3": [
        ("skips accelerator.backward", _plain_backward),
        ("forgets × k", _forgets_times_k),
        ("docs' recipe, outside accumulate()", _docs_recipe_without_accumulate),
        ("prefetch inside accumulate()", _prefetch_inside_accumulate),
        ("0 × loss, then loss.backward()", _zero_then_plain_backward),
        ("one backward per window, padded", _one_backward_per_window_padded),
        ("scheduler every micro-batch", _scheduler_every_micro_batch),
        ("scheduler never stepped", _scheduler_never_stepped),
        ("forward outside accumulate()", _forward_outside_accumulate),
        ("accumulate() without the model", _accumulate_without_model),
        ("num_steps set to 1", _num_steps_set_to_one),
        ("zero_grad() before step()", _zero_grad_before_step),
        ("sync_gradients forced True", _sync_forced_every_micro_batch),
        ("each window under no_sync", _window_under_no_sync),
        ("each window under the class's no_sync", _window_under_class_no_sync),
        ("inner accumulate() steered to sync", _steered_inner_accumulate),
    ],
}
STUBS = {
    "11.1": [("the lesson's cell", None)],
    "11.2": [("the lesson's cell", _stub_loss)],
    "11.3": [("the lesson's cell", _stub_epoch)],
}
HINTS = {
    "a step count that is not whole": "answer with a whole number",
}


def _transformers_fixed_cross_entropy(outputs, labels, num_items_in_batch=None):
    """Right: transformers' own summed-then-divided loss, handed the window's count."""
    from transformers.loss.loss_utils import fixed_cross_entropy

    logits = outputs["logits"]
    return fixed_cross_entropy(logits.flatten(0, 1), labels.flatten(), num_items_in_batch)


def _transformers_fixed_cross_entropy_without_count(outputs, labels, num_items_in_batch=None):
    """The same function, the count not handed on: a mean per micro-batch."""
    from transformers.loss.loss_utils import fixed_cross_entropy

    return fixed_cross_entropy(outputs["logits"].flatten(0, 1), labels.flatten())


RIGHT["11.2"].append(
    ("transformers' fixed_cross_entropy with the count", _transformers_fixed_cross_entropy)
)
WRONG["11.2"].append(
    (
        "transformers' fixed_cross_entropy without the count",
        _transformers_fixed_cross_entropy_without_count,
    )
)


def _loss_as_a_float(outputs, labels, num_items_in_batch=None):
    return 1.0


def _loss_nan(outputs, labels, num_items_in_batch=None):
    return outputs["logits"].sum() * float("nan")


WRONG["11.2"] += [("a Python float", _loss_as_a_float), ("a NaN loss", _loss_nan)]
HINTS.update({"a Python float": "return the loss as a tensor", "a NaN loss": "must be finite"})

# --- answers that hard-code the lesson's window counts (cell 4 prints the tokens per micro-batch)


def _lesson_window_tokens() -> dict:
    """{a micro-batch's labels: its window's real tokens} for the lesson's token data (seed 0)."""
    problem = al.frameworks.make_problem("tokens", 4)
    batches = problem.micro_batches()
    out = {}
    for window in problem.windows():
        count = sum(problem.items(batches[i].y) for i in window)
        out.update({tuple(batches[i].y.flatten().tolist()): count for i in window})
    return out


def _hard_coded_counts_loss(outputs, labels, num_items_in_batch=None):
    """Gamed: ignores num_items_in_batch, divides by the lesson's window counts (48, 40, 15),
    looked up from the labels, and the count it is handed on any other batch (a probe)."""
    logits = outputs["logits"]
    total = F.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="sum"
    )
    known = _lesson_window_tokens().get(tuple(labels.flatten().tolist()))
    return total / (known if known is not None else num_items_in_batch)


def _hard_coded_counts_epoch(accelerator, model, optimizer, scheduler, loader, k):
    """Gamed: the lesson's window counts typed in, [48] * 4 + [40] * 4 + [15] * 2."""
    tokens = [48] * 4 + [40] * 4 + [15] * 2
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate(model):
            accelerator.backward(_token_sum(model, x, y) * k / tokens[i])
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _loss_times_0_99(outputs, labels, num_items_in_batch=None):
    """Exact up to ×0.99: the direction is right, the size is not."""
    return 0.99 * _summed_loss(outputs, labels, num_items_in_batch)


def _loss_times_1_plus_5e_6(outputs, labels, num_items_in_batch=None):
    """Off by 5e-6 in float64: above float64's round-off, below float32's."""
    return (1 + 5e-6) * _summed_loss(outputs, labels, num_items_in_batch)


def _count_from_dataset(accelerator, model, optimizer, scheduler, loader, k):
    """The counts read in loader.dataset's order: the loader's only while it does not shuffle."""
    ys = [y for _, y in loader.dataset]
    per_batch = [
        sum(int((ys[j] != IGNORE).sum()) for j in range(i, min(i + 2, len(ys))))
        for i in range(0, len(ys), 2)
    ]
    tokens = [sum(per_batch[i : i + k]) for i in range(0, len(per_batch), k)]
    for i, (x, y) in enumerate(loader):
        with accelerator.accumulate(model):
            accelerator.backward(_token_sum(model, x, y) * k / tokens[i // k])
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def _mean_rescaled(outputs, labels, num_items_in_batch=None):
    """Another right 11.2: the micro-batch mean × its real tokens ÷ the window's count."""
    logits = outputs["logits"]
    mean = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)
    return mean * (labels != IGNORE).sum() / num_items_in_batch


RIGHT["11.1"] += [
    ("a list, four digits", [2, 0.4286]),
    ("2.0 steps and 3/7", (2.0, 3 / 7)),
    ("0-d tensors, truncated", (torch.tensor(2), torch.tensor(0.4285))),
]
RIGHT["11.2"].append(("float64 mean × micro-batch tokens ÷ count", _mean_rescaled))
# counted in one pass (or in dataset order), trained in another: on a shuffled loader the windows
# of the pass that trains are not the ones counted
WRONG["11.3"] += [
    ("two passes, tensor counts", _exact_with_tensor_count),
    ("two passes, np.int64 counts, float32 loss", _exact_with_numpy_counts),
    ("counts from loader.dataset", _count_from_dataset),
]
WRONG["11.2"] += [
    ("hard-coded window counts", _hard_coded_counts_loss),
    ("×0.99", _loss_times_0_99),
    ("×(1 + 5e-6) in float64", _loss_times_1_plus_5e_6),
]
WRONG["11.3"].append(("hard-coded window counts, epoch", _hard_coded_counts_epoch))
HINTS.update(
    {
        "hard-coded window counts": "not by numbers of your own",
        "hard-coded window counts, epoch": "another token data set",
        "×0.99": "points the reference's way, but its size is ×0.99",
        "×(1 + 5e-6) in float64": "1e-10",
        "two passes, tensor counts": "each pass over it gives another order",
        "two passes, np.int64 counts, float32 loss": "each pass over it gives another order",
        "counts from loader.dataset": "none of them loader.dataset's",
    }
)


def _grad_divided_at_sync(accelerator, model, optimizer, scheduler, loader, k):
    """Exact at every step, but not what 11.3 asks: the token sums go in undivided and .grad is
    divided by the window's tokens when it syncs. The prompt says each backward's addition is
    compared; the hint must say why this one is refused."""
    tokens = 0
    for x, y in loader:
        with accelerator.accumulate(model):
            tokens += int((y != IGNORE).sum())
            accelerator.backward(_token_sum(model, x, y) * k)
            if accelerator.sync_gradients:
                for p in model.parameters():
                    p.grad.div_(tokens)
                tokens = 0
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


WRONG["11.3"].append(("every step exact, .grad divided at the sync", _grad_divided_at_sync))
HINTS["every step exact, .grad divided at the sync"] = "rescaled afterwards (at the sync)"


def _counts_typed_in_probe_read_from_the_frame():
    """The lesson's seed-0 window counts (48, 40, 15) typed in; the checker's doubled-count probe
    told apart by reading the calling line (`sys._getframe`) and answered with half the value."""
    import linecache
    import sys

    counts, state = [48] * 4 + [40] * 4 + [15] * 2, {"i": 0}

    def loss(outputs, labels, num_items_in_batch=None):
        logits = outputs["logits"]
        s = F.cross_entropy(
            logits.flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum"
        )
        frame = sys._getframe(1)
        if frame.f_code.co_name != "loss_func":  # the checker's small pre-checks
            return s / (num_items_in_batch if num_items_in_batch is not None else 1)
        if "doubled" in linecache.getline(frame.f_code.co_filename, frame.f_lineno):
            i = state["i"] - 1 if "loss" in frame.f_locals else state["i"]
            return s / counts[i % 10] / 2
        state["i"] += 1
        return s / counts[(state["i"] - 1) % 10]

    return loss


WRONG["11.2"].append(
    (
        "seed 0's counts typed in, the probe read from the frame",
        _counts_typed_in_probe_read_from_the_frame(),
    )
)
HINTS["seed 0's counts typed in, the probe read from the frame"] = "another token data set"


def _sync_forced_inside_accumulate(accelerator, model, optimizer, scheduler, loader, k):
    """Every window taken with next() first, the last one too, and sync_gradients set by hand
    inside accumulate() to True on each window's last micro-batch only. Every step is exact, but
    the loader had reported its end before the last window's first micro-batch, so accumulate()
    entered it with sync_gradients True and no no_sync: on several processes it would be
    all-reduced. At its backward the value is the forced False."""
    batches = iter(loader)
    for start in range(0, len(loader), k):  # next() no further than the last batch
        window = [next(batches) for _ in range(min(k, len(loader) - start))]
        tokens = sum(int((y != IGNORE).sum()) for _, y in window)
        for j, (x, y) in enumerate(window):
            with accelerator.accumulate(model):
                accelerator.gradient_state._set_sync_gradients(j == len(window) - 1)
                accelerator.backward(_token_sum(model, x, y) * k / tokens)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()


WRONG["11.3"].append(("sync_gradients forced inside accumulate()", _sync_forced_inside_accumulate))
HINTS["sync_gradients forced inside accumulate()"] = "accumulate() decides on entry"


def _usual_mean_loss(outputs, labels, num_items_in_batch=None):
    """The stub's commented loss: a mean per micro-batch, which the Trainer does not divide."""
    logits = outputs["logits"]
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)


WRONG["11.2"].append(("the stub's mean loss", _usual_mean_loss))
HINTS["the stub's mean loss"] = "uses a compute_loss_func's loss as it is, divided by nothing"
HINTS["transformers' fixed_cross_entropy without the count"] = "divided by nothing"
