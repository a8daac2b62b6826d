"""Lesson 12 exercises: bfloat16's +1, pipeline steps accumulated with scale_grads, B_simple from
per-sample gradients, and a float32 main gradient for a bfloat16 model."""

from __future__ import annotations

import math

import torch

from . import exercise


@exercise("12.1", 1, "Where bfloat16 stops counting")
def first_lost_integer(answer) -> str | None:
    # the smallest positive integer n with bf16(n) + 1 == bf16(n), computed in bfloat16
    if isinstance(answer, bool) or not isinstance(answer, int):
        return "answer with a positive integer"
    if answer == 4096:
        return "4096 + 1 is 4096 in bfloat16, but a smaller n already loses the + 1"
    if answer < 256:
        return (
            "bfloat16 has 8 significant bits: every integer up to 2**8 and its successor are exact"
        )
    if answer != 256:
        return "find the first n whose neighbours in bfloat16 are 2 apart"
    return None


@exercise("12.2", 2, "Two pipeline steps before one optimizer step")
def pipeline_weights(answer) -> str | None:
    # ScheduleGPipe(n_microbatches=8, scale_grads=True, mean loss): step() on batch 1, step() on
    # batch 2, no zeroing in between: (weight of batch 1's mean gradient, weight of batch 2's)
    if (
        not isinstance(answer, (tuple, list))
        or len(answer) != 2
        or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in answer)
    ):
        return "answer with a pair of numbers (weight of step 1, weight of step 2)"
    w1, w2 = (float(a) for a in answer)
    if math.isclose(w1, 0.5) and math.isclose(w2, 0.5):
        return (
            "that is the average you wanted; what does scale_grads do to the .grad already there?"
        )
    if math.isclose(w1, 1.0) and math.isclose(w2, 1.0):
        return "after each step() the schedule divides every .grad by n_microbatches, old sums included"
    if not (math.isclose(w1, 1 / 8) and math.isclose(w2, 1.0)):
        return "step 2 leaves its own mean; step 1's mean was divided once more, by n_microbatches"
    return None


def _noise_points():
    from ..scale.noise import Problem, per_sample_grads

    problem = Problem()
    gen = torch.Generator().manual_seed(12)
    points = []
    for excess in (2.0, 0.05):  # B_simple about 11 and about 89
        x, y = problem.sample(4096, gen)
        points.append(per_sample_grads(problem.point(excess, 3), x, y))
    return points


@exercise("12.3", 2, "B_simple from per-sample gradients")
def b_simple(answer) -> str | None:
    # answer(grads) -> float, grads of shape (samples, parameters)
    from ..scale.noise import noise_scale

    if not callable(answer):
        return "answer with a function b_simple(grads) returning a number"
    for grads in _noise_points():
        expected = noise_scale(grads)["b_simple"]
        got = answer(grads.clone())
        got = float(got.item() if isinstance(got, torch.Tensor) else got)
        if not math.isfinite(got):
            return "the result is not a finite number"
        if abs(got / expected - 1) > 0.05:
            return (
                f"got {got:.3g} where B_simple is about {expected:.3g}: tr(Σ) is the summed "
                "variance of each parameter's gradient around the mean; |G|² the squared norm of "
                "the mean"
            )
    return None


@exercise("12.4", 3, "A float32 main gradient for a bfloat16 model")
def main_grad(answer) -> str | None:
    # answer(model, micro_batches) -> {name: float32 tensor}: the gradient of the mean MSE over all
    # micro-batches (loss / k each), accumulated for a model whose parameters are bfloat16
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
    got = answer(model, chunks)
    if not isinstance(got, dict) or sorted(got) != sorted(exact):
        return f"return a dict with one gradient per parameter name: {sorted(exact)}"
    if any(not isinstance(g, torch.Tensor) or g.dtype != torch.float32 for g in got.values()):
        return "return float32 tensors"
    if any(not torch.equal(p.detach(), before[n]) for n, p in model.named_parameters()):
        return "accumulate gradients only: the parameters must not change"
    bf16, _ = accumulate(model, chunks, "bfloat16 .grad")  # works on a copy

    def error(g):
        diff = torch.cat([(g[n].double() - exact[n]).reshape(-1) for n in exact])
        return float(diff.norm() / torch.cat([e.reshape(-1) for e in exact.values()]).norm())

    if not math.isfinite(error(got)) or error(got) > 0.25:
        return "this is far from the mean gradient: loss / k for each of the k micro-batches"
    if error(got) > error(bf16) / 4:
        return (
            "no better than a bfloat16 .grad: converting at the end is too late, each backward's "
            "gradient must be added into a float32 buffer (register_post_accumulate_grad_hook)"
        )
    return None
