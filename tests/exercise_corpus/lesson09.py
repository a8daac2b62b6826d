"""Lesson 09: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import math

import numpy as np
import torch
import torch.nn.functional as F

import accumlab as al

# bound at import, before any check runs: a name the checker cannot patch
from accumlab.coupling.contrastive import info_nce as _info_nce_bound_early

# --- 09.3: an EMA updated once per optimizer step -------------------------------------------------


def _ema_after_zero_grad(model, micro_batches, optimizer, update_ema):
    k = len(micro_batches)
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()
    optimizer.step()
    optimizer.zero_grad()
    update_ema()  # after zero_grad: the weights are the same, so is the EMA


def _ema_one_backward(model, micro_batches, optimizer, update_ema):
    # the mean of the k micro-batch means as one loss: the same gradient
    losses = [torch.nn.functional.mse_loss(model(mb.x), mb.y) for mb in micro_batches]
    (sum(losses) / len(losses)).backward()
    optimizer.step()
    update_ema()
    optimizer.zero_grad()


def _ema_never(model, micro_batches, optimizer, update_ema):
    k = len(micro_batches)
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()
    optimizer.step()
    optimizer.zero_grad()


def _ema_by_hand(model, micro_batches, optimizer, update_ema):
    # the right arithmetic, but the optimizer the loop was given never steps
    k = len(micro_batches)
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.05 * p.grad
    update_ema()
    optimizer.zero_grad()


def _ema_never_zeroed(model, micro_batches, optimizer, update_ema):
    k = len(micro_batches)
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()
    optimizer.step()
    update_ema()  # the next window adds to this window's gradient


def _ema_zeroed_at_the_start(model, micro_batches, optimizer, update_ema):
    # right weights and EMA, but the window leaves its gradients in .grad for the next one
    optimizer.zero_grad()
    k = len(micro_batches)
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()
    optimizer.step()
    update_ema()


def _ema_zeroed_by_hand(model, micro_batches, optimizer, update_ema):
    # another right form: gradients zeroed in place, not through the optimizer
    k = len(micro_batches)
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()
    optimizer.step()
    update_ema()
    for p in model.parameters():
        p.grad.zero_()


def _ema_starting_code(model, micro_batches, optimizer, update_ema):
    k = len(micro_batches)
    for mb in micro_batches:
        loss = torch.nn.functional.mse_loss(model(mb.x), mb.y) / k
        loss.backward()
        # your code here: is this the place for update_ema()?
    # your code here


def _ema_before_step(model, micro_batches, optimizer, update_ema):
    k = len(micro_batches)
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()
    update_ema()  # toward the weights before this step
    optimizer.step()
    optimizer.zero_grad()


def _ema_summed_lr_divided(model, micro_batches, optimizer, update_ema):
    # the same SGD weights, but the step sees the sum of the micro-batch gradients: with an
    # optimizer that normalises the gradient (Adam) the window would move k times less far
    k = len(micro_batches)
    for mb in micro_batches:
        torch.nn.functional.mse_loss(model(mb.x), mb.y).backward()
    for group in optimizer.param_groups:
        group["lr"] /= k
    optimizer.step()
    for group in optimizer.param_groups:
        group["lr"] *= k
    update_ema()
    optimizer.zero_grad()


def _ema_summed_then_divided(model, micro_batches, optimizer, update_ema):
    # another right form: the sum of the micro-batch gradients, divided by k before the step
    for mb in micro_batches:
        torch.nn.functional.mse_loss(model(mb.x), mb.y).backward()
    with torch.no_grad():
        for p in model.parameters():
            p.grad /= len(micro_batches)
    optimizer.step()
    update_ema()
    optimizer.zero_grad()


# --- 09.4: GradCache -----------------------------------------------------------------------------


def _gradcache_autograd_grad(model, data, micro_batch_size):
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        reps = [model(al.coupling.pair_inputs(c)) for c in chunks]
    q = torch.cat([z[: len(c)] for z, c in zip(reps, chunks)]).requires_grad_()
    k = torch.cat([z[len(c) :] for z, c in zip(reps, chunks)]).requires_grad_()
    gq, gk = torch.autograd.grad(al.coupling.info_nce(q, k), [q, k])
    start = 0
    for c in chunks:
        z = model(al.coupling.pair_inputs(c))
        n = len(c)
        cached = torch.cat([gq[start : start + n], gk[start : start + n]])
        torch.autograd.backward(z, cached)  # the same as <z, cached>.backward()
        start += n


def _gradcache_two_forwards_per_chunk(model, data, micro_batch_size):
    # anchors and positives as two forwards of one micro-batch: still one micro-batch's graph
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        q = torch.cat([model(c.x) for c in chunks]).requires_grad_()
        k = torch.cat([model(c.y) for c in chunks]).requires_grad_()
    al.coupling.info_nce(q, k).backward()
    sizes = [len(c) for c in chunks]
    for c, gq, gk in zip(chunks, q.grad.split(sizes), k.grad.split(sizes)):
        zq, zk = model(c.x), model(c.y)
        ((zq * gq).sum() + (zk * gk).sum()).backward()


def _gradcache_functional_full_batch(model, data, micro_batch_size):
    # one forward of the whole batch with a graph, through the model's own weights: no module
    # hook fires, but the whole batch's graph is alive at once
    h = al.coupling.pair_inputs(data)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            h = torch.nn.functional.linear(h, layer.weight, layer.bias)
        elif isinstance(layer, torch.nn.Tanh):
            h = torch.tanh(h)
    n = len(data)
    al.coupling.info_nce(h[:n], h[n:]).backward()


def _gradcache_open_clip_loop(model, data, micro_batch_size):
    # open_clip's --accum-freq: each micro-batch recomputed among the cached embeddings, the
    # whole loss evaluated and backpropagated once per micro-batch
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        cache = [model(al.coupling.pair_inputs(c)) for c in chunks]
    for j, c in enumerate(chunks):
        reps = [*cache[:j], model(al.coupling.pair_inputs(c)), *cache[j + 1 :]]
        q = torch.cat([z[: len(b)] for z, b in zip(reps, chunks)])
        k = torch.cat([z[len(b) :] for z, b in zip(reps, chunks)])
        al.coupling.info_nce(q, k).backward()


def _gradcache_layer_by_layer(model, data, micro_batch_size):
    # the whole batch through the layers one by one, with a graph: no caching at all
    h = al.coupling.pair_inputs(data)
    for layer in model:
        h = layer(h)
    n = len(data)
    al.coupling.info_nce(h[:n], h[n:]).backward()


def _gradcache_open_clip_loop_imported_loss(model, data, micro_batch_size):
    # open_clip's loop with info_nce imported from its module: a name bound before the check
    from accumlab.coupling.contrastive import info_nce

    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        cache = [model(al.coupling.pair_inputs(c)) for c in chunks]
    for j, c in enumerate(chunks):
        reps = [*cache[:j], model(al.coupling.pair_inputs(c)), *cache[j + 1 :]]
        q = torch.cat([z[: len(b)] for z, b in zip(reps, chunks)])
        k = torch.cat([z[len(b) :] for z, b in zip(reps, chunks)])
        info_nce(q, k).backward()


def _hand_info_nce(q, k, temperature=0.1):
    logits = torch.nn.functional.normalize(q, dim=-1) @ torch.nn.functional.normalize(k, dim=-1).T
    return torch.nn.functional.cross_entropy(logits / temperature, torch.arange(len(q)))


def _gradcache_open_clip_loop_own_loss(model, data, micro_batch_size):
    # open_clip's loop with a hand-written InfoNCE: the loss evaluated once per micro-batch
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        cache = [model(al.coupling.pair_inputs(c)) for c in chunks]
    for j, c in enumerate(chunks):
        reps = [*cache[:j], model(al.coupling.pair_inputs(c)), *cache[j + 1 :]]
        q = torch.cat([z[: len(b)] for z, b in zip(reps, chunks)])
        k = torch.cat([z[len(b) :] for z, b in zip(reps, chunks)])
        _hand_info_nce(q, k).backward()


def _gradcache_pass_2_graphs_kept(model, data, micro_batch_size):
    # GradCache's arithmetic, but every pass-2 graph kept alive until one backward at the end
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        reps = [model(al.coupling.pair_inputs(c)) for c in chunks]
    q = torch.cat([z[: len(c)] for z, c in zip(reps, chunks)]).requires_grad_()
    k = torch.cat([z[len(c) :] for z, c in zip(reps, chunks)]).requires_grad_()
    al.coupling.info_nce(q, k).backward()
    sizes = [len(c) for c in chunks]
    surrogate = 0
    for c, gq, gk in zip(chunks, q.grad.split(sizes), k.grad.split(sizes)):
        z = model(al.coupling.pair_inputs(c))
        surrogate = surrogate + (z[: len(c)] * gq).sum() + (z[len(c) :] * gk).sum()
    surrogate.backward()


def _gradcache_all_graphs_alive(model, data, micro_batch_size):
    chunks = data.micro_batches(micro_batch_size)
    reps = [model(al.coupling.pair_inputs(c)) for c in chunks]
    q = torch.cat([z[: len(c)] for z, c in zip(reps, chunks)])
    k = torch.cat([z[len(c) :] for z, c in zip(reps, chunks)])
    al.coupling.info_nce(q, k).backward()


def _gradcache_open_clip_loop_bound_early(model, data, micro_batch_size):
    # open_clip's loop through a name bound when this module was imported
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        cache = [model(al.coupling.pair_inputs(c)) for c in chunks]
    for j, c in enumerate(chunks):
        reps = [*cache[:j], model(al.coupling.pair_inputs(c)), *cache[j + 1 :]]
        q = torch.cat([z[: len(b)] for z, b in zip(reps, chunks)])
        k = torch.cat([z[len(b) :] for z, b in zip(reps, chunks)])
        _info_nce_bound_early(q, k).backward()


def _gradcache_grads_copied(model, data, micro_batch_size):
    # al.coupling.gradcache_grads' body, pasted, on the model itself
    from accumlab.coupling.gradcache import _replayed, _rng_state, _split

    chunks = data.micro_batches(micro_batch_size)
    states, first = [], []
    with torch.no_grad():
        for c in chunks:
            inputs = al.coupling.pair_inputs(c)
            states.append(_rng_state(inputs))
            first.append(model(inputs))
    q, k = (t.detach().requires_grad_() for t in _split(first, chunks))
    al.coupling.info_nce(q, k).backward()
    sizes = [len(c) for c in chunks]
    cached = list(zip(q.grad.split(sizes), k.grad.split(sizes), strict=True))
    for c, state, (gq, gk) in zip(chunks, states, cached, strict=True):
        with _replayed(state):
            z = model(al.coupling.pair_inputs(c))
        z.backward(torch.cat([gq, gk]))


def _gradcache_library(model, data, micro_batch_size):
    grads = al.coupling.gradcache_grads(model, data, micro_batch_size)["grads"]
    for name, p in model.named_parameters():
        p.grad = grads[name].clone()


def _gradcache_stub(model, data, micro_batch_size):
    # your code here: chunks = data.micro_batches(micro_batch_size); pass 1 without a graph,
    # the loss once over all cached embeddings, then pass 2 chunk by chunk
    return None


RIGHT = {
    "09.1": [
        ("a numpy float", np.float64(0.9 ** (1 / 16))),
        ("a numpy float32", np.float32(0.9) ** np.float32(1 / 16)),
        ("a float32 0-d tensor", torch.tensor(0.9) ** (1 / 16)),
        ("rounded to 5 digits", 0.99344),
        ("truncated to 5 digits", 0.99343),
        ("through exp and log", math.exp(math.log(0.9) / 16)),
    ],
    "09.2": [
        ("a list", ["token_mean_global", "constant"]),
        ("a tuple, other order", ("constant", "token_mean_global")),
        ("a frozenset", frozenset({"token_mean_global", "constant"})),
        ("dict keys", {"token_mean_global": 1, "constant": 2}.keys()),
        ("capitalised", {"Constant", "token_mean_global"}),
    ],
    "09.3": [
        ("update after zero_grad", _ema_after_zero_grad),
        ("one backward of the mean of the means", _ema_one_backward),
        ("gradients zeroed in place", _ema_zeroed_by_hand),
        ("summed, .grad divided by k before the step", _ema_summed_then_divided),
    ],
    "09.4": [
        ("torch.autograd.grad, then backward(z, cached)", _gradcache_autograd_grad),
        ("anchors and positives as two forwards per chunk", _gradcache_two_forwards_per_chunk),
    ],
}

WRONG = {
    "09.1": [
        ("β itself: no change", 0.9),
        ("0.9 ** 16: the share with β = 0.9", 0.9**16),
        ("too few digits", 0.993),
        ("4 digits: too few", 0.9934),
        ("the first-order approximation 1 + ln(0.9)/16", 1 + math.log(0.9) / 16),
        ("the first-order approximation, rounded to 5 digits", 0.99341),
        ("§3's β = 0.99, unchanged", 0.99),
    ],
    "09.2": [
        (
            "with the per-micro-batch token mean",
            {"token_mean_local", "token_mean_global", "constant"},
        ),
        (
            "seq_mean too: read as the step's sequences",
            {"seq_mean", "token_mean_global", "constant"},
        ),
        ("one of the two", {"constant"}),
        ("none", set()),
    ],
    "09.3": [
        ("no EMA update", _ema_never),
        ("update before the step", _ema_before_step),
        ("SGD by hand: the optimizer never steps", _ema_by_hand),
        ("gradients never zeroed", _ema_never_zeroed),
        ("zeroed at the start: gradients left in .grad", _ema_zeroed_at_the_start),
        ("summed, the learning rate divided by k", _ema_summed_lr_divided),
    ],
    "09.4": [
        ("all graphs alive: big-batch memory", _gradcache_all_graphs_alive),
        ("layer by layer over the whole batch", _gradcache_layer_by_layer),
        ("functional full batch: no module hook fires", _gradcache_functional_full_batch),
        ("open_clip's loop: the whole loss once per micro-batch", _gradcache_open_clip_loop),
        ("open_clip's loop, info_nce imported", _gradcache_open_clip_loop_imported_loss),
        ("open_clip's loop, a hand-written InfoNCE", _gradcache_open_clip_loop_own_loss),
        ("every pass-2 graph alive, one backward", _gradcache_pass_2_graphs_kept),
        ("accumlab's own GradCache", _gradcache_library),
        (
            "open_clip's loop, info_nce bound before the check",
            _gradcache_open_clip_loop_bound_early,
        ),
        ("a copy of gradcache_grads' body", _gradcache_grads_copied),
    ],
}

STUBS = {
    "09.3": [("the lesson's starting code, untouched", _ema_starting_code)],
    "09.4": [("the lesson's cell", _gradcache_stub)],
}

# the words each of these wrong answers' hint must contain (tests/test_exercises.py)
HINTS = {
    "zeroed at the start: gradients left in .grad": "still hold a gradient in .grad",
    "summed, the learning rate divided by k": "4× it along that direction",
    "open_clip's loop, info_nce imported": "open_clip's loop",
    "open_clip's loop, info_nce bound before the check": "open_clip's loop",
    "a copy of gradcache_grads' body": "write it yourself",
    "the first-order approximation 1 + ln(0.9)/16": "first-order approximation",
    "the first-order approximation, rounded to 5 digits": "first-order approximation",
    "4 digits: too few": "more digits",
    "open_clip's loop, a hand-written InfoNCE": "open_clip's loop",
    "every pass-2 graph alive, one backward": "encoder graph (16 rows) is alive at a time",
    "open_clip's loop: the whole loss once per micro-batch": "open_clip's loop",
}


def _gradcache_decoys(model, data, micro_batch_size):
    """Zero-loss decoy passes through every micro-batch."""
    for chunk in data.micro_batches(micro_batch_size):
        (model(al.coupling.pair_inputs(chunk)) * 0).sum().backward()


def _big_batch_in_a_thread(model, data, micro_batch_size):
    """The whole batch on a hook-free copy in another thread (saved-tensor hooks are per thread),
    decoy passes on the model, the copy's gradient written into .grad."""
    import copy
    import threading

    out = {}

    def work():
        twin = copy.deepcopy(model)
        for m in twin.modules():
            m._forward_hooks.clear()
            m._forward_pre_hooks.clear()
        al.coupling.contrastive_loss(twin, data).backward()
        out.update({n: q.grad.clone() for n, q in twin.named_parameters()})

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    _gradcache_decoys(model, data, micro_batch_size)
    for n, p in model.named_parameters():
        p.grad = out[n]


def _big_batch_by_hand_then_copied(model, data, micro_batch_size):
    """The whole batch's gradient by hand-written layers on detached weights (no module runs), in
    another thread (saved-tensor hooks are per thread); then an honest GradCache pass, and the
    hand-made gradient written over what it added."""
    import threading

    weights = [p.detach().clone().requires_grad_() for p in model.parameters()]
    out = []

    def work():
        h = al.coupling.pair_inputs(data)
        i = 0
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                h = torch.nn.functional.linear(h, weights[i], weights[i + 1])
                i += 2
            elif isinstance(layer, torch.nn.Tanh):
                h = torch.tanh(h)
        n = len(data)
        out.extend(torch.autograd.grad(_hand_info_nce(h[:n], h[n:]), weights))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    _gradcache_autograd_grad(model, data, micro_batch_size)
    for p, g in zip(model.parameters(), out, strict=True):
        p.grad = 2 * g  # twice the batch's gradient: only the copy is wrong


WRONG["09.4"] += [
    (
        "the whole batch on a copy in another thread, decoys, .grad copied in",
        _big_batch_in_a_thread,
    ),
    ("decoy passes only", _gradcache_decoys),
    ("the whole batch by hand, copied over an honest pass", _big_batch_by_hand_then_copied),
]
HINTS.update(
    {
        "the whole batch on a copy in another thread, decoys, .grad copied in": "another model's layers",
        "decoy passes only": "added nothing",
        # the hand-made batch-wide graph is a second batch-wide graph beside the honest loss's
        "the whole batch by hand, copied over an honest pass": "2 separately built graphs",
    }
)


def _functional_full_grad(model, data):
    """The whole batch's gradient by hand-written layers on detached weights (no module runs)."""
    weights = [p.detach().clone().requires_grad_() for p in model.parameters()]
    h, i = al.coupling.pair_inputs(data), 0
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            h = torch.nn.functional.linear(h, weights[i], weights[i + 1])
            i += 2
        elif isinstance(layer, torch.nn.Tanh):
            h = torch.tanh(h)
    n = len(data)
    return torch.autograd.grad(_hand_info_nce(h[:n], h[n:]), weights)


def _injected_through_the_parameters(model, data, micro_batch_size):
    """The whole batch's gradient from another thread, put into .grad by one backward through
    the parameters alone, behind tiny decoy passes through each micro-batch's forward."""
    import threading

    out = []
    thread = threading.Thread(target=lambda: out.extend(_functional_full_grad(model, data)))
    thread.start()
    thread.join()
    for chunk in data.micro_batches(micro_batch_size):
        (model(al.coupling.pair_inputs(chunk)).sum() * 1e-3).backward()
    params = list(model.parameters())
    sum((p * (g - p.grad)).sum() for p, g in zip(params, out, strict=True)).backward()


def _gradcache_one_tower_at_a_time(model, data, micro_batch_size):
    """Right: pass 2 back-propagates each micro-batch's anchors, then its positives, separately
    (GradCache's two-tower form)."""
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        q = torch.cat([model(c.x) for c in chunks]).requires_grad_()
        k = torch.cat([model(c.y) for c in chunks]).requires_grad_()
    al.coupling.info_nce(q, k).backward()
    sizes = [len(c) for c in chunks]
    for c, gq, gk in zip(chunks, q.grad.split(sizes), k.grad.split(sizes), strict=True):
        (model(c.x) * gq).sum().backward()
        (model(c.y) * gk).sum().backward()


RIGHT["09.4"].append(("pass 2 one tower at a time", _gradcache_one_tower_at_a_time))
WRONG["09.4"].append(
    (
        "the whole batch in a thread, injected through the parameters",
        _injected_through_the_parameters,
    )
)
HINTS["the whole batch in a thread, injected through the parameters"] = "other than pass 2"


def _pass1_with_graph_detached(model, data, micro_batch_size):
    """Pass 1 forwarded with a graph per micro-batch and detached at once: no backward runs in
    pass 1, so its hint must name the graph it kept, not a backward that added something."""
    from accumlab.coupling.contrastive import info_nce

    starts = range(0, len(data), micro_batch_size)
    za = [model(data.x[i : i + micro_batch_size]).detach() for i in starts]
    zp = [model(data.y[i : i + micro_batch_size]).detach() for i in starts]
    a, p = torch.cat(za).requires_grad_(), torch.cat(zp).requires_grad_()
    info_nce(a, p).backward()
    for i in starts:
        s = slice(i, i + micro_batch_size)
        z = torch.cat([model(data.x[s]), model(data.y[s])])
        z.backward(torch.cat([a.grad[s], p.grad[s]]))


WRONG["09.4"].append(("pass 1 with a graph, detached", _pass1_with_graph_detached))
HINTS["pass 1 with a graph, detached"] = "pass 1 embeds under torch.no_grad()"


def _open_clip_loss_checkpointed(reentrant):
    """open_clip's loop with a hand-written InfoNCE under torch.utils.checkpoint: the loss's saved
    tensors are dropped, so the bytes held stay under GradCache's bound, but the whole loss is
    still backpropagated once per micro-batch."""
    from torch.utils.checkpoint import checkpoint

    def answer(model, data, micro_batch_size):
        chunks = data.micro_batches(micro_batch_size)
        with torch.no_grad():
            cache = [model(al.coupling.pair_inputs(c)) for c in chunks]
        for j, c in enumerate(chunks):
            reps = [*cache[:j], model(al.coupling.pair_inputs(c)), *cache[j + 1 :]]
            q = torch.cat([z[: len(b)] for z, b in zip(reps, chunks)])
            k = torch.cat([z[len(b) :] for z, b in zip(reps, chunks)])
            checkpoint(_hand_info_nce, q, k, use_reentrant=reentrant).backward()

    return answer


WRONG["09.4"] += [
    ("open_clip's loop, own loss under checkpoint", _open_clip_loss_checkpointed(False)),
    ("open_clip's loop, own loss under reentrant checkpoint", _open_clip_loss_checkpointed(True)),
]
HINTS["open_clip's loop, own loss under checkpoint"] = "once per micro-batch is open_clip"
HINTS["open_clip's loop, own loss under reentrant checkpoint"] = "open_clip's loop"


def _naive_accumulation(model, data, micro_batch_size):
    """Each micro-batch's own InfoNCE (its negatives only), ÷ the number of micro-batches."""
    chunks = data.micro_batches(micro_batch_size)
    for c in chunks:
        z, n = model(al.coupling.pair_inputs(c)), len(c)
        (al.coupling.info_nce(z[:n], z[n:]) / len(chunks)).backward()


WRONG["09.4"].append(("naive accumulation: each micro-batch's own loss", _naive_accumulation))
HINTS["naive accumulation: each micro-batch's own loss"] = "that is naive accumulation"


# --- batch-wide backward passes: what GradCache may do, and open_clip's loop in row blocks ------
def _cached(model, data, micro_batch_size):
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        reps = [model(al.coupling.pair_inputs(c)) for c in chunks]
    q = torch.cat([z[: len(c)] for z, c in zip(reps, chunks)]).requires_grad_()
    k = torch.cat([z[len(c) :] for z, c in zip(reps, chunks)]).requires_grad_()
    return chunks, q, k


def _gradcache_two_grad_calls_flat_surrogate(model, data, micro_batch_size):
    """The loss's gradient in two autograd.grad calls (the loss graph walked twice, into the
    cached embeddings only); pass 2 through a flattened surrogate <z, g>."""
    chunks, q, k = _cached(model, data, micro_batch_size)
    loss = al.coupling.info_nce(q, k)
    (gq,) = torch.autograd.grad(loss, q, retain_graph=True)
    (gk,) = torch.autograd.grad(loss, k)
    sizes = [len(c) for c in chunks]
    for c, a, b in zip(chunks, gq.split(sizes), gk.split(sizes)):
        z = model(al.coupling.pair_inputs(c))
        (z.reshape(-1) * torch.cat([a, b]).reshape(-1)).sum().backward()


def _open_clip_in_row_blocks(model, data, micro_batch_size):
    """open_clip's loop with every tensor on the gradient's path at most one micro-batch's rows
    long: the logits built in row blocks against all columns, the whole loss per micro-batch."""
    chunks, q, k = _cached(model, data, micro_batch_size)
    qn, kn = F.normalize(q.detach(), dim=1), F.normalize(k.detach(), dim=1)
    start, rows = 0, len(qn)
    for c in chunks:
        n = len(c)
        z = model(al.coupling.pair_inputs(c))
        zq, zk = F.normalize(z[:n], dim=1), F.normalize(z[n:], dim=1)
        total = 0
        for r in range(0, rows, n):
            block = zq if r == start else qn[r : r + n]
            logits = torch.cat([block @ kn[:start].T, block @ zk.T, block @ kn[start + n :].T], 1)
            total = total + F.cross_entropy(logits / 0.1, torch.arange(r, r + n), reduction="sum")
        (total / rows).backward()
        start += n


RIGHT["09.4"].append(
    ("two autograd.grad calls, a flattened surrogate", _gradcache_two_grad_calls_flat_surrogate)
)
WRONG["09.4"].append(("open_clip's loop in row blocks", _open_clip_in_row_blocks))
HINTS["open_clip's loop in row blocks"] = "open_clip's loop"


def _gradcache_checkpointed_pass2(reentrant):
    """GradCache with pass 2's forwards under torch.utils.checkpoint: reentrant, the first forward
    runs without a graph and backward reruns it with one; non-reentrant, the forward records a
    graph whose saved tensors backward recomputes. Either way it is GradCache."""
    from torch.utils.checkpoint import checkpoint

    def step(model, data, micro_batch_size):
        chunks, q, k = _cached(model, data, micro_batch_size)
        al.coupling.info_nce(q, k).backward()
        sizes = [len(c) for c in chunks]
        for c, gq, gk in zip(chunks, q.grad.split(sizes), k.grad.split(sizes)):
            x = al.coupling.pair_inputs(c).requires_grad_(reentrant)
            z = checkpoint(model, x, use_reentrant=reentrant)
            ((z[: len(c)] * gq).sum() + (z[len(c) :] * gk).sum()).backward()

    return step


RIGHT["09.4"] += [
    ("pass 2 under checkpoint", _gradcache_checkpointed_pass2(False)),
    ("pass 2 under reentrant checkpoint", _gradcache_checkpointed_pass2(True)),
]


def _whole_batch_pass2_reentrant(model, data, micro_batch_size):
    """Pass 2 as one reentrant-checkpointed forward of the whole batch: its graph, recorded when
    backward reruns it, spans every row at once."""
    from torch.utils.checkpoint import checkpoint

    chunks, q, k = _cached(model, data, micro_batch_size)
    al.coupling.info_nce(q, k).backward()
    x = torch.cat([al.coupling.pair_inputs(c) for c in chunks]).requires_grad_()
    z = checkpoint(model, x, use_reentrant=True)
    g = torch.cat(
        [
            torch.cat([a, b])
            for a, b in zip(*(t.grad.split([len(c) for c in chunks]) for t in (q, k)))
        ]
    )
    (z * g).sum().backward()


WRONG["09.4"].append(("pass 2 as one reentrant-checkpointed forward", _whole_batch_pass2_reentrant))
HINTS["pass 2 as one reentrant-checkpointed forward"] = "embed the whole batch"


def _open_clip_loop_inline_loss_into_embedding(model, data, micro_batch_size):
    """open_clip's loop with the loss written inline and split in two: per micro-batch the whole
    InfoNCE is built again, backpropagated only into that micro-batch's cached embedding
    (autograd.grad), and the gradient carried through the model by a second, narrow backward, so
    no batch-wide backward runs into the model."""
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        reps = [model(al.coupling.pair_inputs(c)) for c in chunks]
    sizes = [len(c) for c in chunks]
    for j, c in enumerate(chunks):
        rr = [r.clone() for r in reps]
        rr[j].requires_grad_()
        q = torch.cat([r[:m] for r, m in zip(rr, sizes)])
        k = torch.cat([r[m:] for r, m in zip(rr, sizes)])
        logits = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).T / 0.1
        (g,) = torch.autograd.grad(F.cross_entropy(logits, torch.arange(len(q))), rr[j])
        model(al.coupling.pair_inputs(c)).backward(g)


WRONG["09.4"].append(
    ("open_clip's loop, inline loss into one embedding", _open_clip_loop_inline_loss_into_embedding)
)
HINTS["open_clip's loop, inline loss into one embedding"] = "4 separately built graphs"


def _gradcache_whole_batch_pass_1(model, data, micro_batch_size):
    """Pass 1 as one graph-less forward of the whole batch (the exercise allows it: no graph is
    kept; GradCache chunks pass 1 too, for the activations a forward holds while it runs)."""
    chunks = data.micro_batches(micro_batch_size)
    n = len(data)
    with torch.no_grad():
        z = model(torch.cat([data.x, data.y]))
    q, k = z[:n].clone().requires_grad_(), z[n:].clone().requires_grad_()
    al.coupling.info_nce(q, k).backward()
    sizes = [len(c) for c in chunks]
    for c, gq, gk in zip(chunks, q.grad.split(sizes), k.grad.split(sizes)):
        out = model(al.coupling.pair_inputs(c))
        ((out[: len(c)] * gq).sum() + (out[len(c) :] * gk).sum()).backward()


RIGHT["09.4"].append(
    ("pass 1 one graph-less forward of the whole batch", _gradcache_whole_batch_pass_1)
)


def _gradcache_grad_doubled(model, data, micro_batch_size):
    """An honest GradCache pass, then .grad doubled: pass 2 wrote it, but the step would train
    on twice the batch's gradient (a factor the check allows only as loss × c with .grad ÷ c)."""
    _gradcache_autograd_grad(model, data, micro_batch_size)
    for p in model.parameters():
        p.grad = 2 * p.grad


WRONG["09.4"].append(("an honest pass, .grad doubled", _gradcache_grad_doubled))
HINTS["an honest pass, .grad doubled"] = "differs from the big batch's"


def _open_clip_in_square_blocks(model, data, micro_batch_size):
    """open_clip's loop with the InfoNCE written by hand in blocks of one micro-batch by one, so
    no matrix on the gradient's path is wider than a micro-batch: the loss per micro-batch."""
    chunks = data.micro_batches(micro_batch_size)
    n = [len(c) for c in chunks]
    with torch.no_grad():
        reps = [model(al.coupling.pair_inputs(c)) for c in chunks]
    qd = [F.normalize(r[:m], dim=-1) for r, m in zip(reps, n)]
    kd = [F.normalize(r[m:], dim=-1) for r, m in zip(reps, n)]
    t = al.coupling.TEMPERATURE
    for j, c in enumerate(chunks):
        z = model(al.coupling.pair_inputs(c))
        q, k = list(qd), list(kd)
        q[j], k[j] = F.normalize(z[: n[j]], dim=-1), F.normalize(z[n[j] :], dim=-1)
        loss = 0
        for a in range(len(chunks)):
            lse = sum(torch.exp(q[a] @ k[b].T / t).sum(1) for b in range(len(chunks)))
            loss = loss + (torch.log(lse) - (q[a] * k[a]).sum(-1) / t).sum()
        (loss / sum(n)).backward()


WRONG["09.4"].append(("open_clip's loop in square blocks", _open_clip_in_square_blocks))
HINTS["open_clip's loop in square blocks"] = "nonlinear function of the embeddings"


def _open_clip_blocks_into_a_copy(model, data, micro_batch_size):
    """open_clip's loop in square blocks whose gradient goes into a copy of the micro-batch's
    embeddings, carried into the model by a second backward: the loss built k times."""
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        reps = [model(al.coupling.pair_inputs(c)) for c in chunks]
    n = [len(c) for c in chunks]
    t = al.coupling.TEMPERATURE
    for j, c in enumerate(chunks):
        copies = [r.clone() for r in reps]
        copies[j].requires_grad_()
        qs = [F.normalize(r[:m], dim=-1) for r, m in zip(copies, n)]
        ks = [F.normalize(r[m:], dim=-1) for r, m in zip(copies, n)]
        loss = 0
        for a, qa in enumerate(qs):
            blocks = [qa @ kb.T / t for kb in ks]
            lse = torch.logsumexp(torch.stack([torch.logsumexp(b, dim=1) for b in blocks]), dim=0)
            loss = loss + (lse - blocks[a].diagonal()).sum()
        (g,) = torch.autograd.grad(loss / sum(n), copies[j])
        model(al.coupling.pair_inputs(c)).backward(g)


def _gradcache_trace_surrogate(model, data, micro_batch_size):
    """GradCache, pass 2's surrogate written as trace(z gᵀ)."""
    chunks, q, k = _cached(model, data, micro_batch_size)
    al.coupling.info_nce(q, k).backward()
    sizes = [len(c) for c in chunks]
    for c, gq, gk in zip(chunks, q.grad.split(sizes), k.grad.split(sizes)):
        z = model(al.coupling.pair_inputs(c))
        torch.trace(z @ torch.cat([gq, gk]).T).backward()


WRONG["09.4"].append(("open_clip's blocks into a copy", _open_clip_blocks_into_a_copy))
HINTS["open_clip's blocks into a copy"] = "separately built graphs with a nonlinear"
RIGHT["09.4"].append(("pass 2 as trace(z gᵀ)", _gradcache_trace_surrogate))


# --- open_clip's loop with its loss inside a custom autograd.Function named like a linear op ---
def _nce_and_grads(q, p, temperature=0.1):
    """InfoNCE of the normalised embeddings and its gradients, worked out without autograd."""
    nq, npp = q / q.norm(dim=-1, keepdim=True), p / p.norm(dim=-1, keepdim=True)
    logits, n = nq @ npp.T / temperature, len(q)
    dl = (torch.softmax(logits, -1) - torch.eye(n, dtype=q.dtype)) / n
    loss = -torch.log_softmax(logits, -1).diagonal().mean()

    def back(x, unit, g):
        return (g - unit * (unit * g).sum(-1, keepdim=True)) / x.norm(dim=-1, keepdim=True)

    return loss, back(q, nq, dl @ npp / temperature), back(p, npp, dl.T @ nq / temperature)


class Mul(torch.autograd.Function):
    """One micro-batch's InfoNCE against the cached batch, its backward written by hand."""

    @staticmethod
    def forward(ctx, zq, zp, q, p, lo, hi):
        q, p = q.clone(), p.clone()
        q[lo:hi], p[lo:hi] = zq, zp
        loss, gq, gp = _nce_and_grads(q, p)
        ctx.grads = (gq[lo:hi], gp[lo:hi])
        return loss

    @staticmethod
    def backward(ctx, g):
        gq, gp = ctx.grads
        return g * gq, g * gp, None, None, None, None


def _open_clip_in_a_function_named_mul(model, data, micro_batch_size):
    pair = al.coupling.pair_inputs
    chunks = data.micro_batches(micro_batch_size)
    with torch.no_grad():
        reps = [model(pair(ch)) for ch in chunks]
    q = torch.cat([z[: len(ch)] for z, ch in zip(reps, chunks)])
    p = torch.cat([z[len(ch) :] for z, ch in zip(reps, chunks)])
    lo = 0
    for ch in chunks:
        n, z = len(ch), model(pair(ch))
        Mul.apply(z[:n], z[n:], q, p, lo, lo + n).backward()
        lo += n


WRONG["09.4"].append(
    ("open_clip's loop, its loss a Function named Mul", _open_clip_in_a_function_named_mul)
)
HINTS["open_clip's loop, its loss a Function named Mul"] = "once per micro-batch"


def _ema_stepped_through_the_class(model, micro_batches, optimizer, update_ema):
    """The step called on the optimizer's class, not through the instance's attribute."""
    k = len(micro_batches)
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()
    type(optimizer).step(optimizer)
    update_ema()
    optimizer.zero_grad()


RIGHT["09.3"].append(("type(optimizer).step(optimizer)", _ema_stepped_through_the_class))


def _ema_stepped_with_a_closure(model, micro_batches, optimizer, update_ema):
    """The window's backwards inside the closure optimizer.step(closure) calls."""
    k = len(micro_batches)

    def closure():
        for mb in micro_batches:
            (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()

    optimizer.step(closure)
    update_ema()
    optimizer.zero_grad()


RIGHT["09.3"].append(("optimizer.step(closure)", _ema_stepped_with_a_closure))


def _ema_zeroed_by_its_own_step_hook(model, micro_batches, optimizer, update_ema):
    """zero_grad() in a step post-hook the answer registers once: it runs after the step."""
    if not getattr(optimizer, "_zeroes_after_step", False):
        optimizer.register_step_post_hook(lambda opt, args, kwargs: opt.zero_grad())
        optimizer._zeroes_after_step = True
    k = len(micro_batches)
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(model(mb.x), mb.y) / k).backward()
    optimizer.step()
    update_ema()


RIGHT["09.3"].append(("zero_grad in its own step post-hook", _ema_zeroed_by_its_own_step_hook))
