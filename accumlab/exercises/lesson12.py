"""Lesson 12 exercises: where float16 stops counting, pipeline steps accumulated with scale_grads,
and a float32 main gradient for a bfloat16 model."""

from __future__ import annotations

import torch

from . import exercise
from ._answers import integer, items, numbers, too_coarse, within
from ._calls import Refuse, plural
from ._draws import pool_seed
from ._graph_watch import _reentrant_rerun


@exercise("12.1", 1, "Where float16 stops counting")
def first_lost_integer(answer) -> str | None:
    # the smallest positive integer n with fp16(n) + 1 == fp16(n), computed here in float16 (the
    # lesson computes bfloat16's: a transfer of the same rule to 11 significant bits)
    n = integer(answer)
    ns = torch.arange(1, 1 << 15, dtype=torch.float32).to(torch.float16)
    expected = int(ns[(ns + 1) == ns][0])
    if n == expected:
        return None
    if n < 1:
        return "the question asks for a positive integer: n >= 1"
    if n == 256:
        return "that is bfloat16's (8 significant bits); float16 keeps 10 stored bits + 1"
    if n < expected:
        return (
            f"{n} + 1 is still exact in float16: where does the spacing between neighbours reach 2?"
        )
    return "find the first n whose neighbours in float16 are 2 apart, then think about the tie"


@exercise("12.2", 2, "Three pipeline steps before one optimizer step")
def pipeline_weights(answer) -> str | None:
    # ScheduleGPipe(n_microbatches=8, scale_grads=True, mean loss): step() on batches 1, 2 and 3,
    # no zeroing in between: the weight of each batch's mean gradient in the final .grad. Each
    # step() divides the whole .grad by 8 (lesson 12 measured two steps at m = 4: (1/4, 1))
    m = 8
    w = numbers(answer, 3)

    def close(a, b, sig=3):
        return within(a, b, sig=sig)  # the suite's rule: rounded or cut after `sig` digits

    want = (1 / m**2, 1 / m, 1.0)
    if all(close(x, y) for x, y in zip(w, want)):
        return None
    typed = items(answer, 3)
    if all(close(x, y) or too_coarse(t, y, sig=3) for x, t, y in zip(w, typed, want)):
        return "close — give more digits (checked to 3 significant digits)"  # right where shown
    if all(close(x, y, sig=2) for x, y in zip(w, want)):
        return (
            "right to 2 significant digits but off in the third: work each weight out exactly, as "
            "a power of 1/n_microbatches, then round (checked to 3 significant digits)"
        )
    if all(close(x, 1 / 3) for x in w):
        return (
            "that is the average you wanted; what does scale_grads do to the .grad already there?"
        )
    if all(close(x, 1.0) for x in w):
        return (
            "with scale_grads=True each step() rescales .grad after its backward passes: does "
            "that touch only the new batch's gradient, or everything .grad holds?"
        )
    if all(close(x, y) for x, y in zip(w, (1 / 16, 1 / 4, 1.0))):
        return "that is the rule for n_microbatches = 4; this schedule has n_microbatches = 8"
    if all(close(x, y / m) for x, y in zip(w, want)):
        return (
            "each micro-batch's loss is already a mean: after its own step() a batch's mean "
            "gradient has weight 1; what do the later step() calls do to it?"
        )
    if all(close(x, y) for x, y in zip(w, reversed(want))):
        return "the right weights in reverse: the triple starts with batch 1, the oldest in .grad"
    if close(w[2], 1.0) and close(w[1], 1 / m) and close(w[0], 1 / m):
        return "batch 1's mean is in .grad during the second step() and during the third"
    return (
        "follow .grad through the three step() calls: what does scale_grads do, at each one, to "
        "what .grad already holds?"
    )


# 12.3's tolerance: relative L2 distance from the checker's own float32 main gradient on the same
# model. A right answer adds the same bfloat16 gradients into float32 and lands within float32
# rounding (measured 0 for a hook, a plain loop, grad_dtype and autograd.grad; ~1e-7 for another
# summation order); a float16 buffer, or a few backwards summed in bfloat16 before each float32
# add, lands ~1e-3 away (seeds 0-2 checked in tests/test_scale.py; the check draws its seed afresh).
MAIN_GRAD_TOLERANCE = 1e-5
# 12.3 draws its model and data from these seeds: on each, every corpus answer gets its verdict
# and hint (tests/test_exercise_machinery.py)
MAIN_GRAD_SEEDS = (2, 4, 6, 7, 8, 9, 11, 12, 14, 15, 17, 18, 22, 24, 25, 26, 27, 28, 32, 35)


def _hooks(model: torch.nn.Module) -> int:
    """How many hooks the model's modules and parameters carry (forward, backward, grad)."""
    kinds = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
    n = sum(len(getattr(m, kind, None) or {}) for m in model.modules() for kind in kinds)
    for p in model.parameters():
        n += len(getattr(p, "_post_accumulate_grad_hooks", None) or {})
        n += len(getattr(p, "_backward_hooks", None) or {})
    return n


def _distance(got: dict, ref: dict) -> float:
    diff = torch.cat([(got[n].double() - ref[n].double()).reshape(-1) for n in ref])
    return float(diff.norm() / torch.cat([r.double().reshape(-1) for r in ref.values()]).norm())


def _bf16_loss_main_grad(model: torch.nn.Module, chunks: list) -> dict:
    """The float32 main gradient of a loss computed in bfloat16 (`mse_loss(pred, y.bfloat16())`):
    the one loss mistake 12.3's last hint names, so the hint names it only for this sum."""
    import copy

    from ..scale.accumulator import MainGrad

    model, k = copy.deepcopy(model), len(chunks)
    main = MainGrad(model)
    for mb in chunks:
        pred = model(mb.x.to(torch.bfloat16))
        (torch.nn.functional.mse_loss(pred, mb.y.to(torch.bfloat16)) / k).backward()
    main.remove()
    return main.buffers


def _diagnose(got: dict, main: dict, bf16: dict, exact: dict, k: int, bf16_loss: dict) -> str:
    """Why an answer that is not the float32 main gradient differs from it (12.3's hints)."""
    g = torch.cat([got[n].double().reshape(-1) for n in main])
    m = torch.cat([main[n].double().reshape(-1) for n in main])
    if not bool(torch.isfinite(g).all()):
        return "your gradient holds inf or NaN"
    scale = float(g @ m / (m @ m))  # the multiple of the mean gradient the answer holds
    if abs(scale - k) < 0.05 * k:
        return f"this is k = {k} times the mean gradient: divide each micro-batch's loss by k"
    if 0.2 * k < scale < 0.8 * k:
        return (
            "each backward adds into .grad: if a hook copies .grad into your buffer it must also "
            "set param.grad = None, or every backward adds the running bfloat16 sum again"
        )
    error, floor = _distance(got, exact), _distance(main, exact)
    if error > 0.25:
        return "this is far from the mean gradient: loss / k for each of the k micro-batches"
    if error > _distance(bf16, exact) / 2:
        return (
            "no better than a bfloat16 .grad: converting at the end is too late, each backward's "
            "gradient must be added into a float32 buffer (register_post_accumulate_grad_hook)"
        )
    if error > 1.2 * floor:
        return (
            f"more rounding than a float32 main gradient (error {error:.1e} against {floor:.1e}): "
            "something is summed in 16 bits first (a float16 buffer, or several backwards in the "
            "bfloat16 .grad before each float32 add)"
        )
    if error < floor / 2:
        return (
            f"closer to the exact gradient ({error:.1e}) than adding the k bfloat16 gradients "
            f"into float32 can be ({floor:.1e}): return the sum of the backwards the model ran, "
            "not a separate float32 computation"
        )
    # blame the loss's dtype only for the sum a bfloat16 loss gives: a few backwards summed in the
    # bfloat16 .grad before each float32 add lands as close to the exact gradient as the floor
    # (1.1-1.22 times it, seeds 0-2 and 4), yet as far from the main gradient as a bfloat16 loss
    distance = _distance(got, main)
    if _distance(got, bf16_loss) <= MAIN_GRAD_TOLERANCE:
        return (
            f"close, but {distance:.1e} from a float32 main gradient of this loss (the tolerance "
            f"is {MAIN_GRAD_TOLERANCE:g}): the loss was computed in bfloat16; compute it in "
            "float32, mse_loss(pred.float(), y.float()) / k"
        )
    return (
        f"close, but {distance:.1e} from a float32 main gradient of the same backwards (the "
        f"tolerance is {MAIN_GRAD_TOLERANCE:g}): something rounds to 16 bits before the float32 "
        "add, such as several backwards summed in the bfloat16 .grad; add each backward's "
        "gradient into float32 as soon as autograd has written it"
    )


@exercise("12.3", 3, "A float32 main gradient for a bfloat16 model")
def main_grad(answer) -> str | None:
    # answer(model, micro_batches) -> {name: float32 tensor}: the gradient of the mean MSE over all
    # micro-batches (loss / k each, computed in float32), accumulated in float32 for a model whose
    # parameters are bfloat16. Observed: k bfloat16 forwards of the micro-batch's rows on the
    # ORIGINAL layers, k backward passes through them (.backward() or torch.autograd.grad), no
    # hooks left behind, no call to accumlab's own implementation; then compared with the checker's
    # own float32 main gradient on the same model, within MAIN_GRAD_TOLERANCE.
    import copy

    from ..data import regression_data
    from ..models import mlp
    from ..scale.accumulator import accumulate

    if not callable(answer):
        return "answer with a function accumulate_fp32(model, micro_batches)"
    k, size = 128, 4
    # drawn afresh for every check: a main gradient computed beforehand for known data does not fit
    seed = pool_seed(MAIN_GRAD_SEEDS)
    model = mlp(8, 32, depth=1, seed=seed).to(torch.bfloat16)
    data = regression_data(n=k * size, features=8, seed=seed)
    chunks = data.micro_batches(size)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    reference = copy.deepcopy(model).double()
    torch.nn.functional.mse_loss(reference(data.x), data.y).backward()
    exact = {n: p.grad for n, p in reference.named_parameters()}
    first = model[0]
    forwards: list[tuple[int, torch.dtype, torch.dtype]] = []  # rows, input dtype, weight dtype
    backwards = [0]
    weight_grads = [0]  # engine runs that computed the first weight's gradient: one per backward

    def count_backward(grad):
        backwards[0] += 1

    def count_weight_grad(grad):
        weight_grads[0] += 1

    def seen_forward(module, args, output):
        # a copy of the layer (deepcopy keeps hooks) is not counted, nor a forward that backward
        # runs again (activation checkpointing recomputes it inside the backward pass)
        if module is not first or not args or not isinstance(output, torch.Tensor):
            return
        if torch._C._current_graph_task_id() == -1:
            forwards.append((len(args[0]), args[0].dtype, module.weight.dtype))
            if output.requires_grad:
                output.register_hook(count_backward)  # any backward through it, however started
        elif output.requires_grad and _reentrant_rerun():
            # a reentrant checkpoint's forward ran without a graph: its rerun carries the backward
            output.register_hook(count_backward)

    hooks = _hooks(model)
    handle = first.register_forward_hook(seen_forward)
    # a tensor hook on the weight fires once per backward pass (or autograd.grad call) however
    # many micro-batches' graphs it sums: one backward of the summed losses fires it once
    weight_handle = first.weight.register_hook(count_weight_grad)
    try:
        # MainGrad._hook too: an instance made without __init__ still registers accumlab's hook
        with Refuse("al.scale.accumulate", "al.scale.MainGrad", "al.scale.MainGrad._hook"):
            got = answer(model, chunks)
    finally:
        handle.remove()
        weight_handle.remove()
    if any(not torch.equal(p.detach(), before[n]) for n, p in model.named_parameters()):
        return "accumulate gradients only: the parameters must not change"
    if any(p.dtype != torch.bfloat16 for p in model.parameters()):
        return "keep the model's parameters in bfloat16: the float32 buffer is extra, not a copy"
    if len(forwards) != k or {rows for rows, _, _ in forwards} != {size}:
        return (
            f"the model's first layer ran {plural(len(forwards), 'forward')} of "
            f"{sorted({r for r, _, _ in forwards})} rows; accumulation runs k = {k} forwards of "
            f"{size}, on the bfloat16 model itself"
        )
    ran = {d for _, x, w in forwards for d in (x, w)}
    if ran != {torch.bfloat16}:
        return (
            f"the first layer's forwards ran with {sorted(str(d) for d in ran)} inputs and weights: "
            "run them in bfloat16 (cast x to bfloat16, leave the layers as they are)"
        )
    if backwards[0] != k:
        return (
            f"{plural(backwards[0], 'backward pass', 'backward passes')} went through the first "
            "layer; one per micro-batch is "
            f"{k} (.backward() or torch.autograd.grad on each micro-batch's loss)"
        )
    if weight_grads[0] != k:
        return (
            f"the first layer's weight got its gradient in "
            f"{plural(weight_grads[0], 'backward pass', 'backward passes')}, not "
            f"k = {k}: one backward of the summed losses sums the graphs itself, it does not "
            "accumulate; run one backward per micro-batch and add each gradient into float32"
        )
    if any(p.grad_dtype not in (None, p.dtype) for p in model.parameters()):
        return (
            "reset param.grad_dtype (to None) before returning: a float32 .grad on a bfloat16 "
            "parameter makes AdamW's step raise (section 1)"
        )
    if any(p.grad is not None and p.grad.dtype != p.dtype for p in model.parameters()):
        return "free the float32 .grad you left on the parameters (param.grad = None)"
    if _hooks(model) != hooks:
        return (
            "your answer left hooks on the model: remove them (handle.remove()) before returning, "
            "or every later backward keeps moving its gradient into your buffer"
        )
    if not isinstance(got, dict) or sorted(got) != sorted(exact):
        return f"return a dict with one gradient per parameter name: {sorted(exact)}"
    if any(not isinstance(g, torch.Tensor) or g.dtype != torch.float32 for g in got.values()):
        return "return float32 tensors"
    if any(g.shape != exact[n].shape for n, g in got.items()):
        return "return one gradient of each parameter's shape"
    main, _ = accumulate(model, chunks, "float32 main_grad")  # on a copy of the model
    if _distance(got, main) <= MAIN_GRAD_TOLERANCE:
        return None
    bf16, _ = accumulate(model, chunks, "bfloat16 .grad")
    return _diagnose(got, main, bf16, exact, k, _bf16_loss_main_grad(model, chunks))
