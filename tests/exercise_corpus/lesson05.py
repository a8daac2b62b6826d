"""Lesson 05: right, wrong and unanswered answers for its exercises (see __init__.py)."""

from decimal import Decimal

import numpy as np
import torch
import torch.nn.functional as F

import accumlab as al


# --- 05.3: other right loops -------------------------------------------------------------------
def accumulate_sum_reduction(model, micro_batches):
    """reduction="sum" divided by the global number of samples: the same gradient."""
    n = sum(len(mb.x) for mb in micro_batches)
    total = 0.0
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y, reduction="sum") / n
        loss.backward()
        total += loss.item()
    return total


def accumulate_detached_total(model, micro_batches):
    """A detached running total: no graph behind it; returned as a 0-d tensor."""
    k = len(micro_batches)
    total = torch.zeros((), dtype=torch.float64)
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y) / k
        loss.backward()
        total += loss.detach()
    return total


def accumulate_autograd_grad(model, micro_batches):
    """torch.autograd.grad per micro-batch, its result added into .grad by hand: one graph at a time."""
    k = len(micro_batches)
    params = list(model.parameters())
    total = 0.0
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y)
        for p, g in zip(params, torch.autograd.grad(loss / k, params), strict=True):
            p.grad = g if p.grad is None else p.grad + g
        total += float(loss.detach()) / k
    return total


def accumulate_layer_by_layer(model, micro_batches):
    """The layers called one by one, the loss logged as a numpy float."""
    k = len(micro_batches)
    total = np.float64(0.0)
    for mb in micro_batches:
        h = mb.x
        for layer in model:
            h = layer(h)
        loss = torch.nn.functional.mse_loss(h, mb.y) / k
        loss.backward()
        total += loss.item()
    return total


def accumulate_with_offloaded_activations(model, micro_batches):
    """The solution with saved activations offloaded to host memory (save_on_cpu): its own
    saved-tensor hooks hide them from the checker's, and the answer is still right."""
    k = len(micro_batches)
    total = 0.0
    with torch.autograd.graph.save_on_cpu():
        for mb in micro_batches:
            loss = torch.nn.functional.mse_loss(model(mb.x), mb.y)
            (loss / k).backward()
            total += loss.item() / k
    return total


# --- 05.3: wrong loops -------------------------------------------------------------------------
def one_full_batch(model, micro_batches):
    """Skips the technique: one forward over everything."""
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss.item()


def keeps_the_loss_tensor(model, micro_batches):
    """Right gradient, but `total += loss` keeps every micro-batch's graph behind the total."""
    k = len(micro_batches)
    total = 0.0
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y) / k
        loss.backward(retain_graph=True)
        total = total + loss
    return total


def _by_hand(model, x):
    """The model's layers computed with torch.nn.functional, bypassing its modules (and hooks)."""
    for layer in model:
        x = (
            torch.nn.functional.linear(x, layer.weight, layer.bias)
            if hasattr(layer, "weight")
            else layer(x)
        )
    return x


def throwaway_forwards_no_grad(model, micro_batches):
    """Games the forward count: 4 forwards under no_grad, then one full-batch graph built outside
    the modules and backpropagated 4 times."""
    with torch.no_grad():
        for mb in micro_batches:
            model(mb.x)
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    loss = torch.nn.functional.mse_loss(_by_hand(model, x), y)
    k = len(micro_batches)
    for i in range(k):
        (loss / k).backward(retain_graph=i < k - 1)
    return loss.item()


def throwaway_forwards_with_graph(model, micro_batches):
    """The same with the 4 throwaway forwards recording graphs: the full batch's saved tensors
    are alive at once."""
    for mb in micro_batches:
        model(mb.x)
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    loss = torch.nn.functional.mse_loss(_by_hand(model, x), y)
    k = len(micro_batches)
    for i in range(k):
        (loss / k).backward(retain_graph=i < k - 1)
    return loss.item()


def _hook_free(model, x):
    """The model's layers run through `Module.forward`, which skips every module hook."""
    for layer in model:
        x = layer.forward(x)
    return x


def hidden_full_batch_graph(model, micro_batches, hooks=torch.autograd.graph.save_on_cpu):
    """Games the graph and saved-bytes checks: 4 real forwards whose losses count 0, and one
    full-batch loss built outside the module hooks, under saved-tensor hooks of its own (which
    hide its saved tensors from the checker's), added to the last backward."""
    k = len(micro_batches)
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    total = 0.0
    for i, mb in enumerate(micro_batches):
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y)
        total += loss.item() / k
        if i < k - 1:
            (loss * 0).backward()
            continue
        with hooks():
            whole = torch.nn.functional.mse_loss(_hook_free(model, x), y)
        (loss * 0 + whole).backward()
    return total


def hidden_graph_identity_hooks(model, micro_batches):
    """The same, its saved tensors hidden by identity saved-tensor hooks."""

    def identity():
        return torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)

    return hidden_full_batch_graph(model, micro_batches, hooks=identity)


def delegates_to_the_audit_loop(model, micro_batches):
    """Lesson 08's correct loop does the accumulation; the loss computed apart."""
    from accumlab.audit import loops

    class NoStep:
        def step(self):
            pass

        def zero_grad(self):
            pass

    pairs = [(mb.x, mb.y) for mb in micro_batches]
    loops.correct_loop(model, NoStep(), pairs, len(pairs))
    with torch.no_grad():
        x = torch.cat([mb.x for mb in micro_batches])
        y = torch.cat([mb.y for mb in micro_batches])
        return float(torch.nn.functional.mse_loss(_hook_free(model, x), y))


def float32_running_total(model, micro_batches):
    """Right gradient; the mean loss summed into a float32 0-d tensor, which rounds it."""
    k = len(micro_batches)
    total = torch.zeros(())
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y) / k
        loss.backward()
        total += loss.detach()
    return total


def keeps_losses_in_a_list(model, micro_batches):
    """Backward per micro-batch frees the saved tensors, but the list keeps every graph's nodes."""
    k = len(micro_batches)
    losses = []
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y)
        (loss / k).backward()
        losses.append(loss)
    return sum(loss.item() for loss in losses) / k


def adds_the_loss_after_backward(model, micro_batches):
    """`total = total + loss` after each backward: the total's graph holds every micro-batch's."""
    k = len(micro_batches)
    total = 0
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y) / k
        loss.backward()
        total = total + loss
    return total.item()


def unpacks_a_micro_batch(model, micro_batches):
    """Treats a micro-batch as an (x, y) pair: it is an al.Data."""
    k = len(micro_batches)
    total = 0.0
    for x, y in micro_batches:
        loss = torch.nn.functional.mse_loss(model(x), y) / k
        loss.backward()
        total += loss.item()
    return total


def no_division(model, micro_batches):
    total = 0.0
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y)
        loss.backward()  # k times too large a gradient
        total += loss.item() / len(micro_batches)
    return total


def calls_the_package(model, micro_batches):
    """accumlab's own loop does the work."""
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    return float(al.memory.train_step(model, opt, micro_batches)) / 32


RIGHT = {
    "05.1": [
        ("a float", 1.8e7),
        ("a numpy integer", np.int64(18_000_000)),
        ("a 0-d tensor", torch.tensor(18_000_000)),
        ("a Decimal", Decimal("18000000")),
    ],
    "05.2": [
        ("a list", [64, 3]),
        ("numpy integers", (np.int64(64), np.int64(3))),
        ("a 1-d tensor", torch.tensor([64, 3])),
        ("whole floats", (64.0, 3.0)),
    ],
    "05.3": [
        ("reduction='sum' over the global count", accumulate_sum_reduction),
        ("a detached 0-d tensor total", accumulate_detached_total),
        ("torch.autograd.grad summed into .grad", accumulate_autograd_grad),
        ("layer by layer, a numpy float", accumulate_layer_by_layer),
        ("activations offloaded with save_on_cpu", accumulate_with_offloaded_activations),
    ],
}
WRONG = {
    "05.1": [
        ("one buffer", 6_000_000),
        ("the number of parameters", 3_000_000),
        ("parameters, gradients and state", 30_000_000.0),
        ("float32 buffers", 36_000_000),
        ("five bytes off", 18_000_005),
        ("one byte off", 18_000_001),
        ("two float32 moments", 24_000_000),
        ("a bool", True),
    ],
    "05.2": [
        ("the floor plus the samples (one moment only)", (48, 4)),
        ("too large", (96, 2)),
        ("the pair swapped", (3, 64)),
        ("fits but smaller than it could be", (32, 6)),
        ("not a divisor", (65, 3)),
        ("the whole batch", (192, 1)),
    ],
    "05.3": [
        ("one full-batch forward", one_full_batch),
        ("the running total keeps its graphs", keeps_the_loss_tensor),
        ("no / k", no_division),
        ("calls al.memory.train_step", calls_the_package),
        ("throwaway no_grad forwards, one full-batch graph", throwaway_forwards_no_grad),
        ("throwaway forwards, one full-batch graph", throwaway_forwards_with_graph),
        ("the losses kept in a list", keeps_losses_in_a_list),
        ("loss added to a total after backward", adds_the_loss_after_backward),
        ("a micro-batch unpacked as x, y", unpacks_a_micro_batch),
        ("a hidden full-batch graph under save_on_cpu", hidden_full_batch_graph),
        ("a hidden full-batch graph under identity hooks", hidden_graph_identity_hooks),
        ("calls lesson 08's correct loop", delegates_to_the_audit_loop),
        ("a float32 running total", float32_running_total),
    ],
}
# the words a wrong answer's hint must contain (tests/test_exercises.py, tests/test_footprint.py)
HINTS = {
    "throwaway no_grad forwards, one full-batch graph": "without recording a graph",
    "throwaway forwards, one full-batch graph": "micro-batches' worth",
    "the losses kept in a list": "a loss or an output in a list",
    "loss added to a total after backward": "graphs were referenced",
    "a micro-batch unpacked as x, y": "micro_batches is a list of al.Data",
    "a hidden full-batch graph under save_on_cpu": "did not receive the mean loss's gradient",
    "a hidden full-batch graph under identity hooks": "did not receive the mean loss's gradient",
    "calls lesson 08's correct loop": "write it yourself",
    "a float32 running total": "float32 running total",
    "one byte off": "a byte count is exact",
    "five bytes off": "count each buffer again",
    "the pair swapped": "(micro_batch_size, k), in that order",
    "two float32 moments": "8 bytes per parameter",
}
STUBS = {
    "05.1": [("None", None)],
    "05.2": [("(None, None)", (None, None))],
}


def _returns_nan(model, micro_batches):
    """A right loop that returns NaN: the hint names the NaN, not the number's type."""
    for mb in micro_batches:
        (F.mse_loss(model(mb.x), mb.y) / len(micro_batches)).backward()
    return float("nan")


WRONG["05.3"].append(("a right loop returning NaN", _returns_nan))
HINTS["a right loop returning NaN"] = "got nan"


def _graphs_hidden_and_unmarked(model, micro_batches):
    """Every graph alive at once behind the answer's own hooks, and the nodes' metadata cleared."""

    def clear(t):
        seen, stack = set(), [t.grad_fn]
        while stack:
            fn = stack.pop()
            if fn is None or id(fn) in seen:
                continue
            seen.add(id(fn))
            fn.metadata.clear()
            stack.extend(f for f, _ in fn.next_functions)

    k = len(micro_batches)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        losses = [F.mse_loss(model(mb.x), mb.y) for mb in micro_batches]
        for loss in losses:
            clear(loss)
    total = 0.0
    for loss in losses:
        (loss / k).backward()
        total += loss.item()
    return total / k


WRONG["05.3"].append(("graphs hidden by own hooks, metadata cleared", _graphs_hidden_and_unmarked))
HINTS["graphs hidden by own hooks, metadata cleared"] = "graphs alive at once"
WRONG["05.3"].append(("a right loop returning NaN as np.float32", lambda m, mbs: np.float32("nan")))
HINTS["a right loop returning NaN as np.float32"] = "got nan"


def _checkpointed_lean(model, micro_batches):
    """Right: checkpointing inside the lean loop."""
    from torch.utils.checkpoint import checkpoint

    total = 0.0
    for mb in micro_batches:
        loss = F.mse_loss(checkpoint(model, mb.x, use_reentrant=False), mb.y)
        (loss / len(micro_batches)).backward()
        total += loss.item()
    return total / len(micro_batches)


def _logged_under_no_grad(model, micro_batches):
    """Right: the loss logged by a second forward under no_grad."""
    total = 0.0
    for mb in micro_batches:
        (F.mse_loss(model(mb.x), mb.y) / len(micro_batches)).backward()
        with torch.no_grad():
            total += float(F.mse_loss(model(mb.x), mb.y))
    return total / len(micro_batches)


RIGHT["05.3"] += [
    ("activation checkpointing", _checkpointed_lean),
    ("the loss logged by a no_grad forward", _logged_under_no_grad),
]


def _divided_in_an_output_hook(model, micro_batches):
    """÷ k applied to the gradient at the output by a tensor hook: the same gradient enters the
    model as with loss / k."""
    k = len(micro_batches)
    total = 0.0
    for mb in micro_batches:
        out = model(mb.x)
        out.register_hook(lambda g: g / k)
        loss = F.mse_loss(out, mb.y)
        loss.backward()
        total += loss.item() / k
    return total


def _multiplied_in_an_output_hook(model, micro_batches):
    """loss / k, then the gradient multiplied back by k at the output: each forward receives k
    times the mean loss's gradient (and .grad is the sum of the micro-batch means)."""
    k = len(micro_batches)
    total = 0.0
    for mb in micro_batches:
        out = model(mb.x)
        out.register_hook(lambda g: g * k)
        loss = F.mse_loss(out, mb.y) / k
        loss.backward()
        total += loss.item()
    return total


RIGHT["05.3"].append(("÷ k in a hook on the output", _divided_in_an_output_hook))
WRONG["05.3"].append(("× k in a hook on the output", _multiplied_in_an_output_hook))
HINTS["× k in a hook on the output"] = "what is each micro-batch's loss divided by?"


def _divided_after_the_backwards(model, micro_batches):
    """The summed means' gradient enters the model, then .grad is divided by k: the .grad is
    right, but the prompt asks for ÷ k before backward reaches the model."""
    k = len(micro_batches)
    total = 0.0
    for mb in micro_batches:
        loss = F.mse_loss(model(mb.x), mb.y)
        loss.backward()
        total += loss.item() / k
    for p in model.parameters():
        p.grad /= k
    return total


def _divided_in_a_node_prehook(model, micro_batches):
    """÷ k in a pre-hook on the output's grad_fn: it runs inside the model's first node, after
    the gradient at the output is measured."""
    k = len(micro_batches)
    total = 0.0
    for mb in micro_batches:
        out = model(mb.x)
        out.grad_fn.register_prehook(lambda g: tuple(x / k for x in g))
        loss = F.mse_loss(out, mb.y)
        loss.backward()
        total += loss.item() / k
    return total


for _name, _fn in (
    ("÷ k on .grad after the backwards", _divided_after_the_backwards),
    ("÷ k in a pre-hook on the output's grad_fn", _divided_in_a_node_prehook),
):
    WRONG["05.3"].append((_name, _fn))
    HINTS[_name] = "before backward reaches the model"


def _reentrant_whole_model(model, micro_batches):
    """The lean loop with the whole model under checkpoint(use_reentrant=True): its forward runs
    without a graph; the check does not follow the rerun, and says so."""
    from torch.utils.checkpoint import checkpoint

    total = 0.0
    for mb in micro_batches:
        loss = F.mse_loss(checkpoint(model, mb.x.requires_grad_(), use_reentrant=True), mb.y)
        (loss / len(micro_batches)).backward()
        total += loss.item() / len(micro_batches)
    return total


def _reentrant_per_layer(model, micro_batches):
    """The first layer plain, every later one under checkpoint(use_reentrant=True): each rerun
    runs a backward of its own inside the answer's."""
    from torch.utils.checkpoint import checkpoint

    total = 0.0
    for mb in micro_batches:
        h = model[0](mb.x)
        for layer in list(model)[1:]:
            h = checkpoint(layer, h, use_reentrant=True)
        loss = F.mse_loss(h, mb.y)
        (loss / len(micro_batches)).backward()
        total += loss.item() / len(micro_batches)
    return total


for _name, _fn in (
    ("the whole model under a reentrant checkpoint", _reentrant_whole_model),
    ("later layers under reentrant checkpoints", _reentrant_per_layer),
):
    WRONG["05.3"].append((_name, _fn))
    HINTS[_name] = "Use use_reentrant=False"


def _consumes_the_list(model, micro_batches):
    """Right: the micro-batches taken off the list handed over, which the checker does not
    reuse (an adversarial read)."""
    k, total = len(micro_batches), 0.0
    while micro_batches:
        mb = micro_batches.pop(0)
        loss = F.mse_loss(model(mb.x), mb.y)
        (loss / k).backward()
        total += loss.item() / k
    return total


RIGHT["05.3"].append(("micro-batches popped off the list handed over", _consumes_the_list))
