"""torch.compile of `optimizer.step` under accumulation (lesson 13): the step reads every `.grad`,
so what `zero_grad` leaves there (None or zeros), the optimizer's own state, and gradients marked
as static addresses (the CUDA-graph setup) decide how many graphs it compiles."""

from __future__ import annotations

import logging
from contextlib import contextmanager

import torch

from .. import _validate
from .._threads import one_thread
from .._validate import MAX_STEPS, one_of, positive_int
from .recompiles import BACKENDS, CompileCounter

OPTIMIZERS = ("sgd", "sgd_momentum", "adam")


@contextmanager
def _quiet_profiler_note():
    # optimizer.step wraps itself in a profiler record_function; Dynamo leaves it out of the
    # graph and logs that once ("Profiler record function ... will be ignored"): not this topic
    log = logging.getLogger("torch._dynamo.variables.ctx_manager")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


@one_thread()
def step_recompiles(
    *,
    accumulation_steps: int = 2,
    windows: int = 4,
    set_to_none=(True, False),
    unused_in=(),
    optimizer: str = "sgd",
    static_grads: bool = False,
    static_guard: bool = True,
    backend: str = "eager",
    lr_schedule: str = "constant",
    seed: int = 0,
) -> dict:
    """Graphs compiled for `torch.compile(optimizer.step)` over `windows` accumulation windows.
    Lesson 13.

    Unlike the model's forward, the optimizer's step reads every `.grad`, and Dynamo guards on
    whether each is None. `zero_grad(set_to_none=...)` cycles through `set_to_none` after each
    window; in the windows listed in `unused_in` the model's second branch is not used, so its
    parameters get no gradient — after a `set_to_none=True` their `.grad` is still None at step time.
    `optimizer`: "sgd" (no momentum), "sgd_momentum" (0.9) or "adam". `static_grads=True` marks
    every `.grad` with `torch._dynamo.mark_static_address(grad, guard=static_guard)` before each
    step, as torch advises for CUDA graphs when the gradients keep their addresses. Guarded, the
    graph guards on each gradient's address: a new `.grad` tensor compiles again (until
    `recompile_limit`, then the step runs eagerly). Unguarded (torch's default), Dynamo compiles
    once, and CUDA graphs re-record on a new address, which this count does not see.
    `static_types`: at each step, the `_dynamo_static_input_type` marks on the `.grad`s ("guarded",
    "unguarded"; None unmarked), the mark that count cannot tell from no mark. `branch_moved`: how
    far the second branch's parameters moved at each step (largest |change|). `lr_schedule`:
    "constant" (lr 0.01), "float" (a LambdaLR halving a float lr after every step: the step reads
    the new number) or "tensor" (the same schedule on `lr=torch.tensor(0.01)`, which the scheduler
    fills in place), as torch's recipe "Running the compiled optimizer with an LR Scheduler"
    advises.
    """
    from torch import nn

    accumulation_steps = positive_int("accumulation_steps", accumulation_steps, maximum=MAX_STEPS)
    windows = positive_int("windows", windows, maximum=MAX_STEPS // accumulation_steps,
                 why="micro-steps of Python work")  # fmt: skip
    for i, v in enumerate(_validate.sequence("set_to_none", set_to_none)):
        _validate.flag(f"set_to_none[{i}]", v)
    unused = set()
    for i, w in enumerate(_validate.sequence("unused_in", unused_in, allow_empty=True)):
        unused.add(positive_int(f"unused_in[{i}]", w, minimum=0, maximum=windows - 1,
                                why="a window index"))  # fmt: skip
    one_of("optimizer", optimizer, OPTIMIZERS)
    _validate.flag("static_grads", static_grads)
    _validate.flag("static_guard", static_guard)
    one_of("backend", backend, BACKENDS)
    one_of("lr_schedule", lr_schedule, ("constant", "float", "tensor"))
    seed = _validate.seed("seed", seed)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = nn.ModuleDict({"main": nn.Linear(4, 1), "branch": nn.Linear(4, 1)}).double()
    params = list(model.parameters())
    lr = torch.tensor(0.01) if lr_schedule == "tensor" else 0.01
    opt = (
        torch.optim.Adam(params, lr=lr)
        if optimizer == "adam"
        else torch.optim.SGD(params, lr=lr, momentum=0.9 if optimizer == "sgd_momentum" else 0)
    )
    scheduler = (
        None
        if lr_schedule == "constant"
        else torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5**s)
    )
    counter = CompileCounter(backend)
    torch._dynamo.reset()
    step = torch.compile(opt.step, backend=counter)
    after, none_at_step, moved, types = [], [], [], []
    with _quiet_profiler_note():
        for w in range(windows):
            none_at_step.append(_window(model, gen, accumulation_steps, w not in unused))
            branch = [p.detach().clone() for p in model["branch"].parameters()]
            if static_grads:
                for p in params:
                    if p.grad is not None:
                        torch._dynamo.mark_static_address(p.grad, guard=static_guard)
            marks = {
                getattr(p.grad, "_dynamo_static_input_type", None)
                for p in params
                if p.grad is not None
            }
            types.append(sorted(marks, key=str))
            step()
            after.append(counter.compiles)
            if scheduler is not None:
                scheduler.step()
            moved.append(
                max(
                    float((p.detach() - q).abs().max())
                    for p, q in zip(model["branch"].parameters(), branch)
                )
            )
            opt.zero_grad(set_to_none=bool(set_to_none[w % len(set_to_none)]))
    return {
        "windows": windows,
        "optimizer": optimizer,
        "static_grads": static_grads,
        "static_guard": static_guard,
        "lr_schedule": lr_schedule,
        "recompile_limit": torch._dynamo.config.recompile_limit,
        # how often a CUDA graph may re-record for new static-input addresses (GPU only)
        "cudagraph_rerecord_limit": _inductor_config().triton.cudagraph_unexpected_rerecord_limit,
        "unused_in": sorted(unused),
        "grads_none_at_step": none_at_step,
        "graphs_after_step": after,
        "graphs": counter.compiles,
        "branch_moved": moved,
        "static_types": types,
    }


def _window(model, gen, accumulation_steps: int, use_branch: bool) -> int:
    """One window of micro-batches; returns how many .grad are None at its step."""
    for _ in range(accumulation_steps):
        x = torch.randn(4, 4, generator=gen, dtype=torch.float64)
        out = model["main"](x)
        if use_branch:
            out = out + model["branch"](x)  # the branch this window uses
        out.sum().backward()
    return sum(p.grad is None for p in model.parameters())


def _inductor_config():
    import torch._inductor.config as config

    return config
