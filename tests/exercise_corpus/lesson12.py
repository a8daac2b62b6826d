"""Lesson 12: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import numpy as np
import torch

import accumlab as al


def _grad_dtype_route(model, micro_batches):
    """Another right 12.3: autograd keeps a float32 .grad itself (param.grad_dtype), where torch
    has it; each backward's gradient is added in float32."""
    k = len(micro_batches)
    params = list(model.parameters())
    for p in params:
        p.grad_dtype = torch.float32
    try:
        for mb in micro_batches:
            pred = model(mb.x.to(torch.bfloat16))
            (torch.nn.functional.mse_loss(pred.float(), mb.y.float()) / k).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}
    finally:
        for p in params:
            p.grad = None
            p.grad_dtype = None


def _then_convert(model, micro_batches):
    """bfloat16 .grad accumulated, converted at the end: the rounding already happened."""
    k = len(micro_batches)
    for mb in micro_batches:
        pred = model(mb.x.to(torch.bfloat16))
        (torch.nn.functional.mse_loss(pred.float(), mb.y.float()) / k).backward()
    out = {n: p.grad.float() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return out


def _calls_accumlab(model, micro_batches):
    grads, _ = al.scale.accumulate(model, micro_batches, "float32 main_grad")
    return {n: g.float() for n, g in grads.items()}


def _autograd_grad(model, micro_batches):
    """Another right 12.3, with no hook and no .grad: torch.autograd.grad per micro-batch, each
    bfloat16 gradient added into a float32 buffer."""
    k = len(micro_batches)
    names, params = zip(*model.named_parameters())
    main = [torch.zeros_like(p, dtype=torch.float32) for p in params]
    for mb in micro_batches:
        pred = model(mb.x.to(torch.bfloat16))
        loss = torch.nn.functional.mse_loss(pred.float(), mb.y.float()) / k
        for buf, g in zip(main, torch.autograd.grad(loss, params)):
            buf.add_(g)
    return dict(zip(names, main))


def _plain_loop(model, micro_batches):
    """Another right 12.3: backward, add .grad into float32, free .grad, in the loop itself."""
    k = len(micro_batches)
    main = {n: torch.zeros_like(p, dtype=torch.float32) for n, p in model.named_parameters()}
    for mb in micro_batches:
        pred = model(mb.x.to(torch.bfloat16))
        (torch.nn.functional.mse_loss(pred.float(), mb.y.float()) / k).backward()
        for n, p in model.named_parameters():
            main[n] += p.grad
            p.grad = None
    return main


def _hooked(model, micro_batches, *, dtype=torch.float32, free=True, remove=True, flush=1):
    """A post-accumulate-grad hook into a `dtype` buffer; the wrong variants below set the flags."""
    k = len(micro_batches)
    main = {n: torch.zeros_like(p, dtype=dtype) for n, p in model.named_parameters()}
    names = {p: n for n, p in model.named_parameters()}
    seen = {p: 0 for p in model.parameters()}

    def add(param):
        seen[param] += 1
        if seen[param] % flush == 0:  # flush > 1: sum `flush` backwards in the bfloat16 .grad first
            main[names[param]].add_(param.grad)
            if free:
                param.grad = None

    handles = [p.register_post_accumulate_grad_hook(add) for p in model.parameters()]
    for mb in micro_batches:
        pred = model(mb.x.to(torch.bfloat16))
        (torch.nn.functional.mse_loss(pred.float(), mb.y.float()) / k).backward()
    if remove:
        for h in handles:
            h.remove()
    return {n: b.float() for n, b in main.items()}


def _float16_buffer(model, micro_batches):
    """A float16 buffer: 11 significant bits instead of 24."""
    return _hooked(model, micro_batches, dtype=torch.float16)


def _bf16_then_flush(model, micro_batches):
    """4 backwards summed in the bfloat16 .grad before each add into float32."""
    return _hooked(model, micro_batches, flush=4)


def _hooks_left(model, micro_batches):
    """Right arithmetic, but the hooks stay on the model."""
    return _hooked(model, micro_batches, remove=False)


def _grad_not_freed(model, micro_batches):
    """The hook adds .grad but never frees it: the running bfloat16 sum is added again each time."""
    return _hooked(model, micro_batches, free=False)


def _float32_layers(model, micro_batches):
    """Switches the layers to float32 through p.data for the loop, and back to bfloat16 after."""
    k = len(micro_batches)
    params = list(model.parameters())
    for p in params:
        p.data = p.data.float()
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(model(mb.x.float()), mb.y.float()) / k).backward()
    out = {n: p.grad.clone() for n, p in model.named_parameters()}
    for p in params:
        p.data, p.grad = p.data.to(torch.bfloat16), None
    return out


def _watched_then_exact(model, micro_batches):
    """Runs the watched bfloat16 loop, then returns a separate float32 full-batch gradient."""
    import copy

    _then_convert(model, micro_batches)
    full = copy.deepcopy(model).float()
    x = torch.cat([mb.x for mb in micro_batches]).float()
    y = torch.cat([mb.y for mb in micro_batches]).float()
    torch.nn.functional.mse_loss(full(x), y).backward()
    return {n: p.grad for n, p in full.named_parameters()}


def _one_backward(model, micro_batches):
    """k forwards, then ONE backward of the summed losses with grad_dtype = float32: autograd sums
    the k graphs' gradients itself, nothing is accumulated backward by backward."""
    k = len(micro_batches)
    for p in model.parameters():
        p.grad_dtype = torch.float32
    preds = [model(mb.x.to(torch.bfloat16)) for mb in micro_batches]
    loss = sum(
        torch.nn.functional.mse_loss(p.float(), mb.y.float()) / k
        for p, mb in zip(preds, micro_batches)
    )
    loss.backward()
    out = {n: p.grad.clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad, p.grad_dtype = None, None
    return out


def _grad_dtype_left_set(model, micro_batches):
    """Right sum, but grad_dtype = float32 and the float32 .grads stay on the bfloat16 model."""
    k = len(micro_batches)
    for p in model.parameters():
        p.grad_dtype = torch.float32
    for mb in micro_batches:
        pred = model(mb.x.to(torch.bfloat16))
        (torch.nn.functional.mse_loss(pred.float(), mb.y.float()) / k).backward()
    return {n: p.grad for n, p in model.named_parameters()}


def _all_forwards_first(model, micro_batches):
    """Another right 12.3: all k forwards first (as GPipe does), then k backwards, each one's
    bfloat16 gradient added into float32."""
    k = len(micro_batches)
    names, params = zip(*model.named_parameters())
    main = [torch.zeros_like(p, dtype=torch.float32) for p in params]
    losses = [
        torch.nn.functional.mse_loss(model(mb.x.to(torch.bfloat16)).float(), mb.y.float()) / k
        for mb in micro_batches
    ]
    for loss in losses:
        for buf, g in zip(main, torch.autograd.grad(loss, params)):
            buf.add_(g)
    return dict(zip(names, main))


def _stub(model, micro_batches):
    # your code: register_post_accumulate_grad_hook, a float32 buffer per parameter, ...
    return None


RIGHT = {
    "12.1": [("numpy integer", np.int64(2048)), ("0-d tensor", torch.tensor(2048))],
    "12.2": [
        ("numpy and tensor", (np.float64(1 / 64), np.float64(0.125), torch.tensor(1.0))),
        ("a list, 3 significant digits", [0.0156, 0.125, 1]),
        ("3 digits rounded down", (0.0156, 0.125, 1.00)),
    ],
    "12.3": [
        ("param.grad_dtype = float32", _grad_dtype_route),
        ("torch.autograd.grad, no hook", _autograd_grad),
        ("a plain loop, no hook", _plain_loop),
        ("all forwards, then one autograd.grad each", _all_forwards_first),
    ],
}
WRONG = {
    "12.1": [("4096", 4096), ("1024", 1024)],
    "12.2": [
        ("no rescaling", (1.0, 1.0, 1.0)),
        ("batch 1 divided once more only", (1 / 8, 1 / 8, 1.0)),
        ("two steps' answer", (1 / 8, 1.0)),
        ("batch 1 off in the 3rd digit", (0.0155, 0.125, 1.0)),
        ("batch 1 off in the 3rd digit, above", (0.0157, 0.125, 1.0)),
        ("the right weights to 2 digits", (0.016, 0.13, 1.0)),
    ],
    "12.3": [
        ("converted at the end", _then_convert),
        ("al.scale.accumulate", _calls_accumlab),
        ("a float16 buffer", _float16_buffer),
        ("4 backwards in bfloat16 per float32 add", _bf16_then_flush),
        ("hooks left on the model", _hooks_left),
        (".grad not freed in the hook", _grad_not_freed),
        ("layers switched to float32 for the loop", _float32_layers),
        ("the watched loop, then a float32 full batch", _watched_then_exact),
        ("one backward of the summed losses", _one_backward),
        ("grad_dtype and float32 .grad left on the model", _grad_dtype_left_set),
    ],
}
STUBS = {
    "12.1": [("the lesson's cell", None)],
    "12.2": [("the lesson's cell", None)],
    "12.3": [("the lesson's cell", _stub)],
}
HINTS = {
    "the right weights to 2 digits": "give more digits (checked to 3 significant digits)",
    "no rescaling": "everything .grad holds",
}
WRONG["12.2"] += [
    ("three digits, the third wrong", (0.0155, 0.126, 1.0)),
    ("rounded half up to 2 digits", (0.016, 0.13, 1.0)),
]
WRONG["12.2"] += [
    ("section 2's m = 4 carried over", (1 / 16, 1 / 4, 1.0)),
    ("the mean loss divided by m once more", (1 / 512, 1 / 64, 1 / 8)),
]
WRONG["12.1"] += [("2047", 2047), ("zero", 0), ("a negative number", -4096)]
WRONG["12.2"] += [("the right weights in reverse", (1.0, 1 / 8, 1 / 64))]
HINTS["zero"] = HINTS["a negative number"] = "positive integer"
HINTS["the right weights in reverse"] = "in reverse"
HINTS.update(
    {
        "three digits, the third wrong": "off in the third",
        "rounded half up to 2 digits": "give more digits",
        "section 2's m = 4 carried over": "n_microbatches = 8",
        "the mean loss divided by m once more": "already a mean",
        "1024": "1024 + 1 is still exact",
        "2047": "spacing between neighbours reach 2",
    }
)


from exercise_corpus._copies import compiled_from_source as _compiled_from_source  # noqa: E402
from exercise_corpus._copies import copied_before as _copied_before  # noqa: E402

_ACCUMULATE_COPY = _copied_before(al.scale.accumulate)
_ACCUMULATE_FROM_SOURCE = _compiled_from_source(al.scale.accumulate)


def _behind_a_watched_loop(copy):
    """The loop the checker watches, its result thrown away; the copy computes the answer."""

    def answer(model, micro_batches):
        k = len(micro_batches)
        for mb in micro_batches:
            pred = model(mb.x.to(torch.bfloat16))
            (torch.nn.functional.mse_loss(pred.float(), mb.y.float()) / k).backward()
        model.zero_grad(set_to_none=True)
        grads, _ = copy(model, micro_batches, "float32 main_grad")
        return {n: g.float() for n, g in grads.items()}

    return answer


_accumulate_copy = _behind_a_watched_loop(_ACCUMULATE_COPY)
_accumulate_from_source = _behind_a_watched_loop(_ACCUMULATE_FROM_SOURCE)


WRONG["12.3"] += [
    ("al.scale.accumulate copied with types.FunctionType before the check", _accumulate_copy),
    ("al.scale.accumulate compiled again from its source", _accumulate_from_source),
]
HINTS.update(
    {
        "al.scale.accumulate copied with types.FunctionType before the check": "al.scale.accumulate",
        "al.scale.accumulate compiled again from its source": "al.scale.accumulate",
    }
)


def _two_in_bf16_then_flush(model, micro_batches):
    """2 backwards summed in the bfloat16 .grad before each float32 add: as close to the exact
    gradient as the floor, so only its distance from the main gradient gives it away."""
    return _hooked(model, micro_batches, flush=2)


def _bf16_loss(model, micro_batches):
    """A hook into float32, but the loss computed in bfloat16."""
    k = len(micro_batches)
    main = {n: torch.zeros_like(p, dtype=torch.float32) for n, p in model.named_parameters()}
    for mb in micro_batches:
        pred = model(mb.x.to(torch.bfloat16))
        (torch.nn.functional.mse_loss(pred, mb.y.to(torch.bfloat16)) / k).backward()
        for n, p in model.named_parameters():
            main[n].add_(p.grad)
            p.grad = None
    return main


WRONG["12.3"] += [
    ("2 backwards in bfloat16 per float32 add", _two_in_bf16_then_flush),
    ("the loss computed in bfloat16", _bf16_loss),
]
HINTS.update(
    {
        "2 backwards in bfloat16 per float32 add": "several backwards summed in the bfloat16 .grad",
        "the loss computed in bfloat16": "the loss was computed in bfloat16",
    }
)


def _fp32_with_checkpoint(model, micro_batches):
    """The float32 buffer loop with the forward checkpointed (backward runs it again)."""
    from torch.utils.checkpoint import checkpoint

    k = len(micro_batches)
    main = {n: torch.zeros_like(p, dtype=torch.float32) for n, p in model.named_parameters()}
    for mb in micro_batches:
        pred = checkpoint(model, mb.x.to(torch.bfloat16), use_reentrant=False)
        (torch.nn.functional.mse_loss(pred.float(), mb.y.float()) / k).backward()
        for n, p in model.named_parameters():
            main[n] += p.grad.float()
            p.grad = None
    return main


RIGHT["12.3"].append(
    ("a checkpointed forward, .grad added into float32 buffers", _fp32_with_checkpoint)
)


# --- accumlab's MainGrad hook without its refused __init__ ---------------------------------------
def _main_grad_hook_on_a_namespace(model, micro_batches):
    import types

    import torch.nn.functional as F

    k = len(micro_batches)
    ns = types.SimpleNamespace(
        buffers={n: torch.zeros_like(p, dtype=torch.float32) for n, p in model.named_parameters()}
    )
    handles = [
        p.register_post_accumulate_grad_hook(al.scale.MainGrad._hook(ns, n))
        for n, p in model.named_parameters()
    ]
    for mb in micro_batches:
        (F.mse_loss(model(mb.x.to(torch.bfloat16)).float(), mb.y.float()) / k).backward()
    for h in handles:
        h.remove()
    return ns.buffers


def _main_grad_made_without_init(model, micro_batches):
    import torch.nn.functional as F

    k = len(micro_batches)
    main = object.__new__(al.scale.MainGrad)
    main.buffers = {
        n: torch.zeros_like(p, dtype=torch.float32) for n, p in model.named_parameters()
    }
    main._handles = [
        p.register_post_accumulate_grad_hook(main._hook(n)) for n, p in model.named_parameters()
    ]
    for mb in micro_batches:
        (F.mse_loss(model(mb.x.to(torch.bfloat16)).float(), mb.y.float()) / k).backward()
    main.remove()
    return main.buffers


WRONG["12.3"] += [
    ("MainGrad._hook on a namespace", _main_grad_hook_on_a_namespace),
    ("a MainGrad made with object.__new__", _main_grad_made_without_init),
]


def _checkpointed(reentrant):
    """The float32 buffer with each micro-batch's forward under torch.utils.checkpoint: reentrant,
    the first forward runs without a graph and backward reruns it with one."""
    from torch.utils.checkpoint import checkpoint

    def accumulate_fp32(model, micro_batches):
        k = len(micro_batches)
        names, params = zip(*model.named_parameters())
        buf = [torch.zeros(p.shape, dtype=torch.float32) for p in params]
        for mb in micro_batches:
            x = mb.x.to(torch.bfloat16).requires_grad_(reentrant)
            pred = checkpoint(model, x, use_reentrant=reentrant)
            (torch.nn.functional.mse_loss(pred.float(), mb.y.float()) / k).backward()
            for b, p in zip(buf, params, strict=True):
                b.add_(p.grad.float())
                p.grad = None
        return dict(zip(names, buf, strict=True))

    return accumulate_fp32


RIGHT["12.3"] += [
    ("forwards under checkpoint", _checkpointed(False)),
    ("forwards under reentrant checkpoint", _checkpointed(True)),
]
