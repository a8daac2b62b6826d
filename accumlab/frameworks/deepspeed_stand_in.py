"""Lesson 11: a STAND-IN for DeepSpeed's engine — NOT DeepSpeed, which cannot run on this CPU-only,
offline machine. It reproduces only the two documented behaviours the lesson needs:

* `backward(loss, scale_wrt_gas=True)` divides by `gradient_accumulation_steps` itself
  (DeepSpeed docs, "Training API → Gradient Accumulation": "By default backward() scales the loss
  and gradients by the configured gradient_accumulation_steps"; deepspeed/runtime/engine.py);
* `step()` is called after every micro-batch and updates only on the accumulation boundary,
  `(micro_steps + 1) % gradient_accumulation_steps == 0` (managed mode, the default).

So a loop that ALSO divides by k — as one must without DeepSpeed — shrinks every update k-fold
(DeepSpeed issue #7439; transformers PR #35808 turned the Trainer's own scaling off under DeepSpeed).
What DeepSpeed does with a short last window is not modelled as measured: its maintainers' answer in
#7439 is that it is not handled automatically, and this stand-in, like managed mode, never steps it.
"""

from __future__ import annotations

import torch

from .. import _validate
from .problem import Problem


class StandInEngine:
    """Not DeepSpeed: the documented loss scaling and boundary stepping of `DeepSpeedEngine`,
    around a plain optimizer and scheduler."""

    def __init__(self, model, optimizer, scheduler, gradient_accumulation_steps: int):
        _validate.instance("model", model, torch.nn.Module, "a torch.nn.Module")
        _validate.positive_int("gradient_accumulation_steps", gradient_accumulation_steps)
        _validate.optimizer("optimizer", optimizer)
        if not callable(getattr(scheduler, "step", None)):
            raise ValueError(
                f"scheduler must be an LR scheduler (with .step()), got {scheduler!r:.60}"
            )
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.gas = gradient_accumulation_steps
        self.micro_steps = 0

    def is_gradient_accumulation_boundary(self) -> bool:
        return (self.micro_steps + 1) % self.gas == 0

    def backward(self, loss: torch.Tensor, scale_wrt_gas: bool = True) -> torch.Tensor:
        scaled = loss / self.gas if scale_wrt_gas else loss  # the engine's own ÷ k
        scaled.backward()
        return scaled.detach()

    def step(self) -> None:
        if self.is_gradient_accumulation_boundary():
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad()
        self.micro_steps += 1


def _loop(problem: Problem, model, optimizer, scheduler, divide_by_k: bool) -> dict:
    engine = StandInEngine(model, optimizer, scheduler, problem.k)
    for mb in problem.micro_batches():
        loss = problem.mean_loss(model(mb.x), mb.y)
        if divide_by_k:
            loss = loss / problem.k  # the habit from plain PyTorch: the engine divides AGAIN
        engine.backward(loss)
        engine.step()
    return {}


def stand_in_loop(problem: Problem, model, optimizer, scheduler, folder: str) -> dict:
    """Used as documented: `engine.backward(loss)` with the micro-batch mean loss."""
    return _loop(problem, model, optimizer, scheduler, divide_by_k=False)


def stand_in_double_division_loop(
    problem: Problem, model, optimizer, scheduler, folder: str
) -> dict:
    """The trap: `engine.backward(loss / k)` — divided by k twice."""
    return _loop(problem, model, optimizer, scheduler, divide_by_k=True)
