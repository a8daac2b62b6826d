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


def _stub(model, micro_batches):
    # your code: register_post_accumulate_grad_hook, a float32 buffer per parameter, ...
    return None


RIGHT = {
    "12.1": [("numpy integer", np.int64(2048)), ("0-d tensor", torch.tensor(2048))],
    "12.2": [("numpy and tensor", (np.float64(0.125), torch.tensor(1.0))), ("ints", (1 / 8, 1))],
    "12.3": [("param.grad_dtype = float32", _grad_dtype_route)],
}
WRONG = {
    "12.1": [("4096", 4096), ("1024", 1024)],
    "12.2": [("no rescaling", (1.0, 1.0)), ("both divided", (1 / 16, 1 / 8))],
    "12.3": [("converted at the end", _then_convert), ("al.scale.accumulate", _calls_accumlab)],
}
STUBS = {
    "12.1": [("the lesson's cell", None)],
    "12.2": [("the lesson's cell", None)],
    "12.3": [("the lesson's cell", _stub)],
}
