"""Lesson 12 exercises: where float16 stops counting, pipeline steps accumulated with scale_grads,
and a float32 main gradient for a bfloat16 model."""

from __future__ import annotations

import math

import torch

from . import exercise
from ._answers import integer, numbers
from ._calls import Refuse


@exercise("12.1", 1, "Where float16 stops counting")
def first_lost_integer(answer) -> str | None:
    # the smallest positive integer n with fp16(n) + 1 == fp16(n), computed here in float16 (the
    # lesson computes bfloat16's: a transfer of the same rule to 11 significant bits)
    n = integer(answer)
    ns = torch.arange(1, 1 << 15, dtype=torch.float32).to(torch.float16)
    expected = int(ns[(ns + 1) == ns][0])
    if n == expected:
        return None
    if n == 256:
        return "that is bfloat16's (8 significant bits); float16 keeps 10 stored bits + 1"
    if n < expected:
        return "every integer below 2**(significant bits) and its successor is exact in float16"
    return "find the first n whose neighbours in float16 are 2 apart, then think about the tie"


@exercise("12.2", 2, "Two pipeline steps before one optimizer step")
def pipeline_weights(answer) -> str | None:
    # ScheduleGPipe(n_microbatches=8, scale_grads=True, mean loss): step() on batch 1, step() on
    # batch 2, no zeroing in between: (weight of batch 1's mean gradient, weight of batch 2's)
    w1, w2 = numbers(answer, 2)
    close = lambda a, b: math.isclose(a, b, rel_tol=1e-3)  # noqa: E731 - 3 significant digits
    if close(w1, 0.5) and close(w2, 0.5):
        return (
            "that is the average you wanted; what does scale_grads do to the .grad already there?"
        )
    if close(w1, 1.0) and close(w2, 1.0):
        return "after each step() the schedule divides every .grad by n_microbatches, old sums included"
    if not (close(w1, 1 / 8) and close(w2, 1.0)):
        return "step 2 leaves its own mean; step 1's mean was divided once more, by n_microbatches"
    return None


@exercise("12.3", 3, "A float32 main gradient for a bfloat16 model")
def main_grad(answer) -> str | None:
    # answer(model, micro_batches) -> {name: float32 tensor}: the gradient of the mean MSE over all
    # micro-batches (loss / k each), accumulated for a model whose parameters are bfloat16. Observed:
    # k forwards of the micro-batch's rows on the ORIGINAL bfloat16 layers, k backwards into its
    # parameters, and no call to accumlab's own implementation.
    import copy

    from ..data import regression_data
    from ..models import mlp
    from ..scale.accumulator import accumulate

    if not callable(answer):
        return "answer with a function accumulate_fp32(model, micro_batches)"
    k, size = 128, 4
    model = mlp(8, 32, depth=1, seed=4).to(torch.bfloat16)
    data = regression_data(n=k * size, features=8, seed=4)
    chunks = data.micro_batches(size)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    reference = copy.deepcopy(model).double()
    torch.nn.functional.mse_loss(reference(data.x), data.y).backward()
    exact = {n: p.grad for n, p in reference.named_parameters()}
    first = model[0]
    forwards: list[tuple[int, torch.dtype]] = []
    backwards = {n: 0 for n, _ in model.named_parameters()}

    def seen_forward(module, args):
        if module is first and args:  # a copy of the layer (deepcopy keeps hooks) is not counted
            forwards.append((len(args[0]), args[0].dtype))

    def seen_backward(name):
        def count(param):
            backwards[name] += 1

        return count

    handles = [first.register_forward_pre_hook(seen_forward)]
    handles += [
        p.register_post_accumulate_grad_hook(seen_backward(n)) for n, p in model.named_parameters()
    ]
    try:
        with Refuse("al.scale.accumulate", "al.scale.MainGrad"):
            got = answer(model, chunks)
    finally:
        for h in handles:
            h.remove()
    if any(not torch.equal(p.detach(), before[n]) for n, p in model.named_parameters()):
        return "accumulate gradients only: the parameters must not change"
    if any(p.dtype != torch.bfloat16 for p in model.parameters()):
        return "keep the model's parameters in bfloat16: the float32 buffer is extra, not a copy"
    if len(forwards) != k or {rows for rows, _ in forwards} != {size}:
        return (
            f"the model's first layer ran {len(forwards)} forwards of {sorted({r for r, _ in forwards})} "
            f"rows; accumulation runs k = {k} forwards of {size}, on the bfloat16 model itself"
        )
    if set(backwards.values()) != {k}:
        return f"its parameters saw {sorted(set(backwards.values()))} backwards; one per micro-batch is {k}"
    if not isinstance(got, dict) or sorted(got) != sorted(exact):
        return f"return a dict with one gradient per parameter name: {sorted(exact)}"
    if any(not isinstance(g, torch.Tensor) or g.dtype != torch.float32 for g in got.values()):
        return "return float32 tensors"
    bf16, _ = accumulate(model, chunks, "bfloat16 .grad")  # works on a copy

    def error(g):
        diff = torch.cat([(g[n].double() - exact[n]).reshape(-1) for n in exact])
        return float(diff.norm() / torch.cat([e.reshape(-1) for e in exact.values()]).norm())

    if not math.isfinite(error(got)) or error(got) > 0.25:
        return "this is far from the mean gradient: loss / k for each of the k micro-batches"
    if error(got) > error(bf16) / 4:  # measured: a float32 buffer is ~10-30x better at k = 128
        return (
            "no better than a bfloat16 .grad: converting at the end is too late, each backward's "
            "gradient must be added into a float32 buffer (register_post_accumulate_grad_hook)"
        )
    return None
