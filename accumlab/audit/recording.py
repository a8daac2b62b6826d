"""What an audit records about one run of a learner's loop (lesson 08)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class StepRecord:
    """What the optimizer saw at one `optimizer.step()`. Parameters are read by a step pre-hook
    (before the update), gradients by a post-hook, so a closure that runs the last backward inside
    `step()` (Lightning) is included; under a GradScaler these are the unscaled gradients."""

    index: int
    window: tuple  # micro-batches first forwarded since the previous step (None: unknown input)
    position: int  # distinct micro-batches forwarded so far, counted over the run
    grads: dict[str, torch.Tensor]
    params: dict[str, torch.Tensor]  # before the update: the parameters the window was run at
    lr: float
    scale: float | None  # GradScaler's scale at that moment
    norm_updates: int  # BatchNorm running-statistic updates so far, 0 without BN
    old_graphs: int = 0  # autograd graphs of earlier windows' forwards still alive at this step
    saved_bytes: int = 0  # saved-for-backward bytes still alive at this step (parameters excluded)
    epoch: int = 0  # the epoch (call of the loop) in which this step happened
    skipped: bool = False  # scaler.step found inf/NaN and skipped the update (params unchanged)


@dataclass
class BackwardRecord:
    """One backward pass (or `torch.autograd.grad` call) that reached the model's parameters:
    what it added to each, before `.grad` accumulated it, and which forwards' graphs it went
    through. Read by parameter hooks, which fire on every route into the parameters."""

    step: int  # steps taken before it: it belongs to the window of step `step`
    forwards: tuple[int, ...]  # the tagged forwards it reached (indices into Recording.forwards)
    added: dict[str, torch.Tensor]  # parameter name -> its contribution (float64, CPU)
    finite: bool = True


@dataclass
class Recording:
    steps: list[StepRecord] = field(default_factory=list)
    forwards: list = field(default_factory=list)  # micro-batch of every forward with grad on
    zero_grads: list[int] = field(default_factory=list)  # position at each zero_grad call
    scheduler_steps: list[int] = field(default_factory=list)
    scaler_calls: list[tuple[str, int, float]] = field(default_factory=list)  # method, pos, scale
    events: list[tuple[str, int]] = field(default_factory=list)  # (kind, position) in call order
    tagged: set[int] = field(default_factory=set)  # forwards whose output has an autograd graph
    # at each forward with grad on: earlier forwards whose graph was alive and not yet reached
    waiting_at_forward: list[tuple[int, ...]] = field(default_factory=list)
    backpropagated: set[int] = field(default_factory=set)  # forwards whose graph backward reached
    # at each forward with grad on: earlier forwards whose graph was still alive, reached or not
    alive_at_forward: list[tuple[int, ...]] = field(default_factory=list)
    last_reached: dict[int, int] = field(default_factory=dict)  # forward -> forwards done when
    # a backward last reached its graph
    first_nonfinite_output: tuple[int, object] | None = None  # (forward, micro-batch)
    first_nonfinite_backward: tuple[int, object] | None = None  # gradient into a forward's output
    nonfinite_backward_steps: set[int] = field(default_factory=set)  # steps those gradients reached
    # backward passes whose gradient reached the parameters through no tagged graph: (position,
    # norm of what they added), e.g. model.forward(x) or a submodule called directly
    untracked: list[tuple[int, float]] = field(default_factory=list)
    backwards: list[BackwardRecord] = field(default_factory=list)  # every backward, in order
    modified: list[int] = field(default_factory=list)  # micro-batches the loop changed in place
    leftover_grad_norm: float = 0.0  # norm of .grad when the function returned (the last epoch)
    epoch_starts: list[int] = field(default_factory=list)  # position when each epoch began
    carried_in: list[float] = field(default_factory=list)  # norm of .grad when each epoch began
    error: BaseException | None = None
    error_epoch: int = 0  # the epoch whose call raised or was stopped
    error_where: str = ""  # "scaler.unscale_" when the exception came out of an instrumented call
    error_line: str = ""  # the learner's line that raised, when it can be found
    warnings: list[str] = field(default_factory=list)
    idle_autocast: int = 0  # forwards on CPU inputs inside a torch.autocast("cuda") that is on
    model: nn.Module | None = None
    seconds: float = 0.0

    @property
    def graphs_together(self) -> int:
        """The most forwards whose graphs were alive at once before backward reached them, counting
        only graphs backward later used, or the most forwards one backward pass went through: 1
        when each micro-batch's backward follows its forward."""
        used = self.backpropagated
        waited = max(
            (
                1 + sum(f in used for f in w)
                for f, w in enumerate(self.waiting_at_forward)
                if f in used
            ),
            default=0,
        )
        # a graph alive at forward f that a backward reaches after f was held with f's graph,
        # even if an earlier pass (retain_graph=True) had reached it already
        held = max(
            (
                1 + sum(self.last_reached.get(g, -1) > f for g in alive)
                for f, alive in enumerate(self.alive_at_forward)
                if f in used
            ),
            default=0,
        )
        # one backward pass through several forwards' graphs needed them all alive at once
        return max([waited, held, *(len(b.forwards) for b in self.backwards)])

    @property
    def position(self) -> int:
        return len({b for b in self.forwards if b is not None}) + self.forwards.count(None)


def limits_for(micro_batches: int, samples: int = 0) -> dict[str, int]:
    """How many calls of each kind a loop may make over `micro_batches` holding `samples` (every
    epoch's) before the audit stops it: generous (a loop forwarding every micro-batch twice, or
    every sample alone, or stepping after each micro-batch, stays far inside)."""
    n = micro_batches
    return {
        "forwards": max(4 * n, 2 * samples) + 16,
        "steps": 2 * n + 16,
        "zero_grads": 4 * n + 16,
        "scheduler_steps": 4 * n + 16,
        "scaler_calls": 8 * n + 32,
    }
