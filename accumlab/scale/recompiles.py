"""torch.compile under accumulation: when does it compile again, and is the gradient the same
(lesson 13)?

`CompileCounter` is a torch.compile backend that counts the graphs it is handed and notes whether
each has a symbolic (dynamic) size in one of its tensor inputs, then hands them to a real backend
("aot_eager" by default: it needs no C++ compiler; "inductor" generates and compiles C++ on a CPU).
Graph counts are Dynamo's: a CUDA-graph re-recording under mode="reduce-overhead" is not a new
Dynamo graph and is not counted.
"""

from __future__ import annotations

import copy
import time

import torch

from .. import _validate
from .._threads import one_thread
from .._validate import MAX_STEPS, one_of, positive_int

FIXES = {  # what each does, not what it compiles: lesson 13 asks for a prediction
    "none": "torch.compile(model) with its defaults (dynamic=None)",
    "static": "torch.compile(model, dynamic=False)",
    "mark_dynamic": "torch._dynamo.mark_dynamic(x, 0) on every micro-batch",
    "mark_unbacked": "torch._dynamo.decorators.mark_unbacked(x, 0) on every micro-batch",
    "pad": "pad the short micro-batch to full size, padding weighted 0 in the loss",
}
BACKENDS = ("aot_eager", "inductor", "eager")


class CompileCounter:
    """A torch.compile backend: counts compiled graphs, records whether each has dynamic shapes."""

    def __init__(self, backend: str = "aot_eager"):
        self.backend = one_of("backend", backend, BACKENDS)
        self.graphs: list[dict] = []

    def __call__(self, gm, example_inputs):
        from torch._dynamo import lookup_backend

        values = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
        # a symbolic SIZE of a tensor input: a slice's symbolic storage offset is not a dynamic
        # batch (a size-1 slice gets a static shape with a symbolic offset)
        dynamic = any(
            isinstance(size, torch.SymInt)
            for v in values
            if isinstance(v, torch.Tensor)
            for size in v.shape
        )
        self.graphs.append({"dynamic": dynamic})
        return lookup_backend(self.backend)(gm, example_inputs)

    @property
    def compiles(self) -> int:
        return len(self.graphs)


def _window_loss(pred, y, weight, window_samples: int):
    # sum over real samples / samples in the window: exact for a short last micro-batch too
    return ((pred - y).pow(2) * weight).sum() / window_samples


def _micro_batches(x, y, sizes, fix):
    full = max(sizes)
    start = 0
    for size in sizes:
        xb, yb = x[start : start + size], y[start : start + size]
        weight = torch.ones_like(yb)
        start += size
        if fix == "pad" and size < full:
            pad = full - size  # zero rows, weighted 0: the same gradient, the same shape
            xb = torch.cat([xb, xb.new_zeros(pad, xb.shape[1])])
            yb = torch.cat([yb, yb.new_zeros(pad, yb.shape[1])])
            weight = torch.cat([weight, weight.new_zeros(pad, weight.shape[1])])
        if fix == "mark_dynamic":
            xb = xb.clone()
            torch._dynamo.mark_dynamic(xb, 0)  # compile for any batch size ≥ 2 from the start
        elif fix == "mark_unbacked":
            xb = xb.clone()
            torch._dynamo.decorators.mark_unbacked(xb, 0)  # no guess from the size seen first
        yield xb, yb, weight


@one_thread()
def compiled_accumulation(
    sizes=(4, 4, 2),
    *,
    fix: str = "none",
    windows: int = 2,
    backend: str = "aot_eager",
    features: int = 4,
    hidden: int = 16,
    seed: int = 0,
    recompile_limit: int | None = None,
) -> dict:
    """Accumulate `windows` optimizer steps of micro-batches of `sizes` samples through a compiled
    model, and the same in eager mode. Lesson 13.

    Returns the number of graphs compiled (after each micro-step and in total), whether each graph
    is dynamic, why Dynamo compiled again (the reasons TORCH_LOGS="recompiles" prints), the
    recompile limit in force (`recompile_limit` lowers torch._dynamo.config.recompile_limit for
    this run; past it Dynamo warns and runs the model eagerly), the largest difference between
    compiled and eager accumulated gradients (float64, on the CPU), and seconds.
    """
    from torch._dynamo.utils import clear_compilation_metrics, get_compilation_metrics

    from ..data import regression_data
    from ..models import mlp

    sizes = _validate.positive_ints("sizes", sizes)
    one_of("fix", fix, FIXES)
    windows = positive_int(
        "windows", windows, maximum=MAX_STEPS // len(sizes), why="micro-steps of Python work"
    )
    features = positive_int("features", features)
    seed = _validate.seed("seed", seed)
    _validate.fits_in_memory(
        f"sum(sizes) × windows = {sum(sizes)} × {windows} samples",
        sum(sizes) * windows * (features + 1) * 8,
    )
    if recompile_limit is not None:
        recompile_limit = positive_int(
            "recompile_limit", recompile_limit, maximum=64, why="graphs to compile"
        )
    limit = torch._dynamo.config.recompile_limit if recompile_limit is None else recompile_limit
    window = sum(sizes)
    data = regression_data(n=window * windows, features=features, seed=seed)
    eager = mlp(features, hidden, depth=1, seed=seed)
    model = copy.deepcopy(eager)
    counter = CompileCounter(backend)
    torch._dynamo.reset()  # forget graphs compiled by earlier cells: count from zero
    clear_compilation_metrics()
    start = time.perf_counter()
    compiled = torch.compile(model, backend=counter, dynamic=False if fix == "static" else None)
    after, diffs = [], []
    with torch._dynamo.config.patch(recompile_limit=limit):
        _accumulate(compiled, model, eager, data, sizes, windows, fix, counter, after, diffs)
    reasons = [m.recompile_reason for m in get_compilation_metrics() if m.recompile_reason]
    return {
        "sizes": sizes,
        "fix": fix,
        "backend": backend,
        "compiles": counter.compiles,
        "compiles_after_micro_step": after,
        "dynamic": [g["dynamic"] for g in counter.graphs],
        "recompile_reasons": reasons,
        "recompile_limit": limit,
        "max_grad_diff": max(diffs),
        "seconds": time.perf_counter() - start,
    }


def _accumulate(compiled, model, eager, data, sizes, windows, fix, counter, after, diffs) -> None:
    window = sum(sizes)
    for w in range(windows):
        x, y = data.x[w * window : (w + 1) * window], data.y[w * window : (w + 1) * window]
        for m in (model, eager):
            m.zero_grad(set_to_none=True)
        for xb, yb, weight in _micro_batches(x, y, sizes, fix):
            _window_loss(compiled(xb), yb, weight, window).backward()
            after.append(counter.compiles)
        for xb, yb, weight in _micro_batches(x, y, sizes, "none"):
            _window_loss(eager(xb), yb, weight, window).backward()
        diffs.append(
            max(
                float((p.grad - q.grad).abs().max())
                for p, q in zip(model.parameters(), eager.parameters())
            )
        )


@one_thread()
def zero_grad_recompiles(
    *,
    accumulation_steps: int = 2,
    windows: int = 4,
    set_to_none=(True, False),
    compiled_autograd: bool = False,
    post_accumulate_hook: bool = False,
    backend: str = "eager",
    seed: int = 0,
) -> dict:
    """Compiled forward graphs and compiled-autograd backward captures when `zero_grad` alternates
    through `set_to_none` (one value per window, cycling). Lesson 13.

    With `compiled_autograd=True` the backward is compiled too (torch._dynamo's compiled autograd);
    `post_accumulate_hook=True` adds a `register_post_accumulate_grad_hook` on every parameter, as
    in pytorch issue #118435. Captures are read from torch._dynamo's counters. Whether Dynamo
    compiles again is decided by its guards before any backend runs, so the cheap "eager" backend
    counts the same graphs as the others.
    """
    from torch._dynamo.utils import counters

    from ..models import mlp

    accumulation_steps = positive_int("accumulation_steps", accumulation_steps, maximum=MAX_STEPS)
    windows = positive_int(
        "windows",
        windows,
        maximum=MAX_STEPS // accumulation_steps,
        why="micro-steps of Python work",
    )
    seed = _validate.seed("seed", seed)
    for i, v in enumerate(_validate.sequence("set_to_none", set_to_none)):
        _validate.flag(f"set_to_none[{i}]", v)
    _validate.flag("compiled_autograd", compiled_autograd)
    _validate.flag("post_accumulate_hook", post_accumulate_hook)
    one_of("backend", backend, BACKENDS)
    model = mlp(4, 16, depth=1, seed=seed)
    hook_calls = torch.zeros((), dtype=torch.int64)

    def count(param) -> None:
        hook_calls.add_(1)  # a tensor, not a Python list: traced without a graph break

    if post_accumulate_hook:
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(count)
    counter = CompileCounter(backend)
    torch._dynamo.reset()
    counters.clear()
    gen = torch.Generator().manual_seed(seed)

    def micro_step(x):
        model(x).sum().backward()

    with torch._dynamo.config.patch(compiled_autograd=compiled_autograd):
        step = torch.compile(micro_step, backend=counter)  # inside: the setting is read here
        for w in range(windows):
            for _ in range(accumulation_steps):
                step(torch.randn(4, 4, generator=gen, dtype=torch.float64))
            model.zero_grad(set_to_none=bool(set_to_none[w % len(set_to_none)]))
    captures = int(counters["compiled_autograd"]["captures"])
    return {
        "compiled_autograd": compiled_autograd,
        "accumulation_steps": accumulation_steps,
        "windows": windows,
        "backward_passes": windows * accumulation_steps,
        # every graph the backend compiled (with compiled autograd, backward graphs too)
        "graphs": counter.compiles,
        "backward_captures": captures,
        "hook_calls": int(hook_calls),
    }
