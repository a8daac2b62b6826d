"""Lesson 11's fallback where the `deepspeed` package is not installed: a STAND-IN for DeepSpeed's
engine, NOT DeepSpeed. Where DeepSpeed is installed (as in the project's own environment) the
lesson runs the real engine (`with_deepspeed.py`) and this class is not used. It reproduces only the
two documented behaviours the lesson measures:

* `backward(loss, scale_wrt_gas=True)` divides by `gradient_accumulation_steps` itself
  (DeepSpeed docs, "Training API → Gradient Accumulation": "By default backward() scales the loss
  and gradients by the configured gradient_accumulation_steps"; deepspeed/runtime/engine.py);
* `step()` is called after every micro-batch and updates only on the accumulation boundary,
  `(micro_steps + 1) % gradient_accumulation_steps == 0` (managed mode, the default), with a
  counter that is never reset between epochs, or while `set_gradient_accumulation_boundary`'s
  flag is in force (it stays until set again); unmanaged (`managed=False`), every `step()`
  updates and that override is refused.

A run that used it says so (`run.extra["engine"] == "stand-in"`), and the table labels its row.
"""

from __future__ import annotations

import torch

from .. import _validate


class StandInEngine:
    """Not DeepSpeed: the documented loss scaling and boundary stepping of `DeepSpeedEngine`,
    around a plain optimizer and scheduler."""

    def __init__(
        self, model, optimizer, scheduler, gradient_accumulation_steps: int, managed: bool = True
    ):
        _validate.instance("model", model, torch.nn.Module, "a torch.nn.Module")
        gradient_accumulation_steps = _validate.positive_int(
            "gradient_accumulation_steps", gradient_accumulation_steps
        )
        _validate.optimizer("optimizer", optimizer)
        if not callable(getattr(scheduler, "step", None)):
            raise ValueError(
                f"scheduler must be an LR scheduler (with .step()), got {scheduler!r:.60}"
            )
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.gas = gradient_accumulation_steps
        self.managed = _validate.flag("managed", managed)
        self.micro_steps = 0
        self._boundary: bool | None = None  # set by the caller, as DeepSpeed's override

    def __call__(self, *args, **kwargs):
        return self.model(*args, **kwargs)

    def is_gradient_accumulation_boundary(self) -> bool:
        if not self.managed:
            return True  # the caller calls step() only at its boundaries
        if self._boundary is not None:
            return self._boundary
        return (self.micro_steps + 1) % self.gas == 0

    def set_gradient_accumulation_boundary(self, is_boundary: bool) -> None:
        if not self.managed:  # as DeepSpeed's assert: the caller owns the boundary
            raise ValueError(
                "set_gradient_accumulation_boundary() is not supported with "
                "managed_gradient_accumulation=False; the caller owns the boundary by calling step()"
            )
        self._boundary = _validate.flag("is_boundary", is_boundary)

    def backward(self, loss: torch.Tensor, scale_wrt_gas: bool = True) -> torch.Tensor:
        _validate.tensor("loss", loss, dim=0, floating=True)
        if not loss.requires_grad:  # (a leaf that requires grad is a valid start too)
            raise ValueError(
                "loss has no graph to backward through (computed under no_grad, or detached): "
                "compute it from the model's output"
            )
        scaled = loss / self.gas if _validate.flag("scale_wrt_gas", scale_wrt_gas) else loss
        scaled.backward()
        return scaled.detach()

    def step(self) -> None:
        if self.is_gradient_accumulation_boundary():
            self.optimizer.step()
            self.scheduler.step()
            for (
                p
            ) in self.model.parameters():  # as the engine at ZeRO 0 in float32: no zero_grad call
                p.grad = None
        self.micro_steps += 1
