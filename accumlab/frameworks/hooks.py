"""Measure what a framework did, from the outside: which micro-batches each optimizer step used,
the gradient it used, the learning rate, and when `zero_grad` and the scheduler ran (lesson 11).

Lesson 08's audit records the gradient in an optimizer step PRE-hook. That fits a hand-written loop,
Accelerate and the Transformers Trainer, but not Lightning: Lightning calls
`optimizer.step(closure)` and the closure runs the window's last forward and backward INSIDE
`step`, after the pre-hooks. So the gradient is read here in a step POST-hook (the update does not
touch `.grad`, and nothing zeroes it before `step` returns); the pre-hook keeps the parameters the
window ran at and, for the lesson's comparison, the gradient a pre-hook would have seen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import nn

from ..data import Data
from ..engine import grads_of, params_of


@dataclass
class StepSeen:
    """One optimizer step, as the hooks saw it."""

    window: tuple[int | None, ...]  # micro-batch indices forwarded since the previous step
    params: dict[str, torch.Tensor]  # before the update: the weights the window ran at
    grads: dict[str, torch.Tensor]  # what the update used (read after step)
    grads_at_pre_hook: dict[str, torch.Tensor]  # what a step pre-hook would have read
    lr: float
    end: int  # forwards done when the step ran: the next window starts here


@dataclass
class FrameworkRun:
    """Everything one framework run produced. `logged_loss` / `logged_grad_norm` hold what the
    framework itself logged at each optimizer step (None: it logs nothing by itself)."""

    framework: str
    version: str
    problem: object  # problem.Problem
    steps: list[StepSeen] = field(default_factory=list)
    forwards: list[int | None] = field(default_factory=list)
    zero_grads: list[int] = field(default_factory=list)  # forwards done at each zero_grad call
    scheduler_steps: list[int] = field(default_factory=list)  # forwards done at each call
    logged_loss: list[float] | None = None
    logged_grad_norm: list[float] | None = None
    final_params: dict[str, torch.Tensor] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)  # anything else a runner logged
    seconds: float = 0.0

    @property
    def windows(self) -> list[tuple]:
        return [s.window for s in self.steps]


class RunawayLoop(RuntimeError):
    """Raised from inside the model when a loop forwards far more often than one epoch needs."""


def _key(x: torch.Tensor) -> bytes:
    return x.detach().cpu().contiguous().numpy().tobytes()


def micro_batch_index(micro_batches: list[Data]):
    """A function from a forward's input to the index of the micro-batch it is (None: none)."""
    index = {_key(mb.x): i for i, mb in enumerate(micro_batches)}
    return lambda x: index.get(_key(x)) if isinstance(x, torch.Tensor) else None


class Recorder:
    """Hooks on `model` (the plain torch module whose input is a micro-batch's x), the optimizer
    and the scheduler. Wrapping is per instance: the classes stay untouched."""

    def __init__(self, run: FrameworkRun, model: nn.Module, micro_batches: list[Data]):
        self.run = run
        self.model = model
        self._index = {_key(mb.x): i for i, mb in enumerate(micro_batches)}
        # a learner's loop that never ends is stopped at its next forward, not left to hang
        self._limit = 4 * len(micro_batches) + 16
        self._handles = [model.register_forward_pre_hook(self._on_forward)]
        self._pending: dict | None = None
        self._started = time.perf_counter()
        self._wrap(model, "zero_grad", self._on_zero)

    def _on_forward(self, _module, args) -> None:
        if torch.is_grad_enabled() and args:
            self.run.forwards.append(self._index.get(_key(args[0])))
            if len(self.run.forwards) > self._limit:
                raise RunawayLoop(f"more than {self._limit} forward passes in one epoch")

    def _on_zero(self) -> None:
        self.run.zero_grads.append(len(self.run.forwards))

    @staticmethod
    def _wrap(obj, name: str, before) -> None:
        original = getattr(obj, name)

        def wrapper(*args, **kwargs):
            before()
            return original(*args, **kwargs)

        setattr(obj, name, wrapper)

    def watch(self, optimizer: torch.optim.Optimizer, scheduler=None) -> None:
        """Instrument the torch optimizer (and scheduler) a framework will drive."""
        self._handles.append(optimizer.register_step_pre_hook(self._pre_step))
        self._handles.append(optimizer.register_step_post_hook(self._post_step))
        self._wrap(optimizer, "zero_grad", self._on_zero)
        if scheduler is not None:
            forwards = self.run.forwards
            self._wrap(scheduler, "step", lambda: self.run.scheduler_steps.append(len(forwards)))

    def _pre_step(self, optimizer, _args, _kwargs) -> None:
        self._pending = {
            "params": params_of(self.model),
            "grads": grads_of(self.model),
            "lr": float(optimizer.param_groups[0]["lr"]),
        }

    def _post_step(self, _optimizer, _args, _kwargs) -> None:
        pending, self._pending = self._pending, None
        start = self.run.steps[-1].end if self.run.steps else 0
        self.run.steps.append(
            StepSeen(
                window=tuple(self.run.forwards[start:]),
                params=pending["params"],
                grads=grads_of(self.model),
                grads_at_pre_hook=pending["grads"],
                lr=pending["lr"],
                end=len(self.run.forwards),
            )
        )

    def finish(self) -> FrameworkRun:
        for handle in self._handles:
            handle.remove()
        self.run.final_params = params_of(self.model)
        self.run.seconds = time.perf_counter() - self._started
        return self.run
