"""Exercise 11.3's run: the learner's own epoch under a real `Accelerator(k)`, every
`accelerator.backward`, `accumulate()` and `no_sync` observed as it runs, for the checker
(`exercises._accelerate_epoch.judge_epoch`) to judge what the loop did, not what it returned."""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

import torch

from ..compare import flatten
from ..engine import grads_of, params_of
from .hooks import micro_batch_index
from .problem import Problem
from .with_accelerate import _loader, fresh_accelerator


def accelerate_custom_loop(
    problem: Problem, model, optimizer, scheduler, folder: str, *, epoch_fn, shuffle_seed=None
) -> dict:
    """Your own epoch under a real Accelerator(k): `epoch_fn(accelerator, model, optimizer,
    scheduler, loader, k)` gets everything prepared, the dataloader included (exercise 11.3);
    with `shuffle_seed`, one that reshuffles its micro-batches on every pass.

    Logged for the checker: for each `accelerator.backward` call, the micro-batches forwarded
    since the previous call, the weights, the gradient it added, the loss's dtype (a float32 loss
    is judged to float32's round-off), whether it ran inside
    `accumulate()`, `sync_gradients` and the configured number of steps as it ran,
    `sync_gradients` as each open `accumulate()` was entered (any False holds `no_sync` open),
    whether an `accelerator.no_sync` that `accumulate()` did not open was open; the forwards
    run outside `accumulate()`; the `accumulate()` calls not given the prepared model; and how
    many gradients were accumulated by backward passes outside `accelerator.backward`."""
    accelerator = fresh_accelerator(problem.k)
    net = model
    model, optimizer, loader, scheduler = accelerator.prepare(
        model, optimizer, _loader(problem, shuffle_seed), scheduler
    )
    calls: list[dict] = []
    state = {
        "in_backward": False,
        "in_accumulate": 0,
        "entry_sync": [],  # sync_gradients as each open accumulate() was entered, innermost last
        "forwards": [],
        "outside": 0,
        "forwards_outside": 0,  # DDP's no_sync needs the forward inside it too
        "without_model": 0,  # accumulate() not given the model never enters no_sync
        "entering": False,  # accumulate() is opening its own no_sync
        "no_sync": 0,  # no_sync blocks open that accumulate() did not open
    }
    index = micro_batch_index(problem.micro_batches())

    def on_forward(_module, args) -> None:
        if torch.is_grad_enabled() and args:
            state["forwards"].append(index(args[0]))
            state["forwards_outside"] += state["in_accumulate"] == 0

    def on_grad(_param) -> None:  # every parameter whose .grad a backward pass accumulates
        if not state["in_backward"]:
            state["outside"] += 1

    handles = [net.register_forward_pre_hook(on_forward)]
    handles += [p.register_post_accumulate_grad_hook(on_grad) for p in net.parameters()]
    backward, accumulate = accelerator.backward, accelerator.accumulate
    cls = type(accelerator)
    no_sync = cls.__dict__.get("no_sync")  # None: inherited, the class keeps no own attribute
    unbound = cls.no_sync

    def observed_backward(loss, **kwargs):  # on this instance only
        before, params = flatten(grads_of(net)), params_of(net)
        sync, steps = accelerator.sync_gradients, accelerator.gradient_state.num_steps
        state["in_backward"] = True
        try:
            return backward(loss, **kwargs)
        finally:
            state["in_backward"] = False
            calls.append(
                {
                    "forwards": state["forwards"],
                    "params": params,
                    "added": flatten(grads_of(net)) - before,
                    "in_accumulate": state["in_accumulate"] > 0,
                    "sync_gradients": sync,
                    "entry_sync": list(state["entry_sync"]),
                    "in_no_sync": state["no_sync"] > 0,
                    "num_steps": steps,
                    "dtype": getattr(loss, "dtype", None),
                }
            )
            state["forwards"] = []

    @contextmanager
    def observed_accumulate(*models):
        state["without_model"] += not any(m is model or m is net for m in models)
        with ExitStack() as stack:
            state["entering"] = True  # the no_sync it opens now is its own
            try:
                stack.enter_context(accumulate(*models))
            finally:
                state["entering"] = False
            # accumulate() chose no_sync (or not) from this value on entry; setting it later
            # inside the block does not change whether this micro-batch is all-reduced
            state["in_accumulate"] += 1
            state["entry_sync"].append(accelerator.sync_gradients)
            try:
                yield
            finally:
                state["in_accumulate"] -= 1
                state["entry_sync"].pop()

    @contextmanager
    def observed_no_sync(self, *args, **kwargs):
        # DDP's no_sync keeps every backward inside it from all-reducing, whatever an inner
        # accumulate() decides; on one process it is a nullcontext, so it is counted here
        own = state["entering"] or self is not accelerator
        with unbound(self, *args, **kwargs):
            state["no_sync"] += not own
            try:
                yield
            finally:
                state["no_sync"] -= not own

    accelerator.backward, accelerator.accumulate = observed_backward, observed_accumulate
    # on the class, restored below: `type(accelerator).no_sync(accelerator, model)` and
    # `Accelerator.no_sync(...)` skip an instance attribute but still look the name up here
    cls.no_sync = observed_no_sync
    try:
        epoch_fn(accelerator, model, optimizer, scheduler, loader, problem.k)
    finally:
        if no_sync is None:
            del cls.no_sync
        else:
            cls.no_sync = no_sync
        for handle in handles:
            handle.remove()
    return {
        "backward_calls": calls,
        "outside_backward": state["outside"],
        "forwards_outside_accumulate": state["forwards_outside"],
        "accumulate_without_model": state["without_model"],
    }
