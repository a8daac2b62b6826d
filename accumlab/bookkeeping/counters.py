"""What an optimizer "step" is under accumulation: which micro-batches each step holds for three
ways of counting, across epoch boundaries, and how many steps a learning-rate schedule must be sized
for. Introduced in lesson 10.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from .._validate import MAX_STEPS, _is_int, one_of, positive_int

# How a loop decides that micro-batch i (0-based, index in its epoch) ends a window:
#   per_epoch         — `(i + 1) % k == 0`: the epoch's last micro-batches wait for the next epoch,
#                       their gradient is carried over into its first window (k + leftover batches)
#   sync_at_epoch_end — the same, `or i + 1 == batches_per_epoch`: a short window ends every epoch
#                       (Accelerate's default sync_with_dataloader=True, the Transformers Trainer,
#                       Lightning's accumulate_grad_batches)
#   global            — a counter over the whole run, `(g + 1) % k == 0`: every window holds k
#                       micro-batches and some straddle two epochs (sync_with_dataloader=False)
COUNTERS = ("per_epoch", "sync_at_epoch_end", "global")


@dataclass(frozen=True)
class Schedule:
    """Which micro-steps (global, 0-based: epoch × batches_per_epoch + index) each optimizer step
    sums, for one counter. Lesson 10."""

    batches_per_epoch: int
    accumulation_steps: int
    epochs: int
    counter: str
    windows: tuple[tuple[int, ...], ...]  # one tuple of micro-steps per optimizer step
    leftover: tuple[int, ...]  # micro-steps whose gradient never reached an optimizer step

    @property
    def steps(self) -> int:
        """Optimizer steps the run takes."""
        return len(self.windows)

    @property
    def micro_steps(self) -> int:
        return self.batches_per_epoch * self.epochs

    @property
    def sizes(self) -> list[int]:
        """Micro-batches in each optimizer step's window."""
        return [len(w) for w in self.windows]

    def histogram(self) -> dict[int, int]:
        """Window size -> how many optimizer steps had it."""
        return dict(sorted(Counter(self.sizes).items()))

    def epoch_of(self, micro_step: int) -> int:
        """The epoch (from 0) micro-step `micro_step` (from 0) belongs to."""
        if not _is_int(micro_step) or not 0 <= micro_step < self.micro_steps:
            raise ValueError(
                f"micro_step must be an integer in [0, {self.micro_steps}), got {micro_step!r}"
            )
        return int(micro_step) // self.batches_per_epoch

    def straddling(self) -> list[int]:
        """Optimizer steps whose window holds micro-batches of two epochs."""
        return [
            s for s, w in enumerate(self.windows) if self.epoch_of(w[0]) != self.epoch_of(w[-1])
        ]

    def steps_per_epoch(self) -> list[int]:
        """Optimizer steps taken during each epoch (a step belongs to the epoch it happens in)."""
        counts = [0] * self.epochs
        for w in self.windows:
            counts[self.epoch_of(w[-1])] += 1
        return counts

    def window_lengths(self) -> list[int]:
        """For every micro-step, the number of micro-batches of its window (0: leftover)."""
        lengths = [0] * self.micro_steps
        for w in self.windows:
            for g in w:
                lengths[g] = len(w)
        return lengths

    def ends_window(self) -> list[bool]:
        """For every micro-step, whether the optimizer steps right after it."""
        ends = [False] * self.micro_steps
        for w in self.windows:
            ends[w[-1]] = True
        return ends

    def position_after(self, steps_done: int) -> int:
        """Micro-steps consumed once `steps_done` optimizer steps have been taken (where a resumed
        run must start reading data)."""
        if not _is_int(steps_done):  # the shared integer rule (numpy, 0-d tensors; no bool)
            raise ValueError(f"steps_done must be an integer, got {steps_done!r}")
        steps_done = int(steps_done)
        if not 0 <= steps_done <= self.steps:
            raise ValueError(f"steps_done must be in [0, {self.steps}], got {steps_done}")
        return 0 if steps_done == 0 else self.windows[steps_done - 1][-1] + 1


def step_schedule(
    batches_per_epoch: int,
    accumulation_steps: int,
    epochs: int = 1,
    counter: str = "sync_at_epoch_end",
) -> Schedule:
    """The windows a loop with `counter` forms over `epochs` epochs of `batches_per_epoch`
    micro-batches with `accumulation_steps` = k. Lesson 10."""
    b = positive_int("batches_per_epoch", batches_per_epoch)
    k = positive_int("accumulation_steps", accumulation_steps)
    epochs = positive_int("epochs", epochs)
    one_of("counter", counter, COUNTERS)
    check_micro_steps(b, epochs)
    windows, current = [], []
    for g in range(b * epochs):
        i = g % b
        current.append(g)
        if counter == "global":
            sync = (g + 1) % k == 0
        else:
            sync = (i + 1) % k == 0 or (counter == "sync_at_epoch_end" and i + 1 == b)
        if sync:
            windows.append(tuple(current))
            current = []
    return Schedule(b, k, epochs, counter, tuple(windows), tuple(current))


def check_micro_steps(batches_per_epoch: int, epochs: int) -> None:
    """A schedule is built one micro-step at a time: bounded like every such loop."""
    if batches_per_epoch * epochs > MAX_STEPS:
        raise ValueError(
            f"batches_per_epoch × epochs = {batches_per_epoch} × {epochs} micro-steps; at most "
            f"{MAX_STEPS:,} (each is a step of Python work: more is a typo, not a lesson)"
        )


def scheduler_total_steps(batches_per_epoch: int, accumulation_steps: int, epochs: int) -> int:
    """Optimizer steps of a run that steps at the end of every epoch: ⌈batches / k⌉ × epochs.
    What a learning-rate schedule must be sized for (lesson 10)."""
    b = positive_int("batches_per_epoch", batches_per_epoch)
    k = positive_int("accumulation_steps", accumulation_steps)
    return math.ceil(b / k) * positive_int("epochs", epochs)


def position_from_step(
    step: int, batches_per_epoch: int, accumulation_steps: int, rule: str = "trainer"
) -> int:
    """Where a resumed run starts reading data (micro-steps to skip), derived from the optimizer
    step counter alone, by one of three rules (lesson 10):

    trainer:      whole epochs of ⌈batches / k⌉ steps, then (step mod that) × k micro-batches —
                  the Transformers Trainer's rule, exact at every window boundary of a
                  sync_at_epoch_end run (not of a per_epoch-counter run: ⌊batches / k⌋ steps)
    step_times_k: step × k — exact only while every window holds k micro-batches (global counter,
                  or k dividing the epoch)
    forgets_k:    whole epochs, then (step mod steps per epoch) micro-batches — the trainer
                  rule without the × k (the Transformers Trainer before PR #8624)
    """
    if not _is_int(step) or step < 0:
        raise ValueError(f"step must be a non-negative integer, got {step!r}")
    step = int(step)
    b = positive_int("batches_per_epoch", batches_per_epoch)
    k = positive_int("accumulation_steps", accumulation_steps)
    one_of("rule", rule, POSITION_RULES)
    if rule == "step_times_k":
        return step * k
    per_epoch = math.ceil(b / k)
    epochs, in_epoch = divmod(step, per_epoch)
    return epochs * b + in_epoch * (k if rule == "trainer" else 1)


POSITION_RULES = ("trainer", "step_times_k", "forgets_k")


def warmup_lrs(total_steps: int, warmup_steps: int, steps_taken: int) -> list[float]:
    """The learning-rate factor each of `steps_taken` optimizer steps uses under a linear warm-up
    to 1 over `warmup_steps`, then a linear decay to 0 at `total_steps` — read from a real
    `torch.optim.lr_scheduler.LambdaLR` stepped once per optimizer step. Lesson 10."""
    import torch

    factor = linear_warmup(total_steps, warmup_steps)
    steps_taken = positive_int(
        "steps_taken", steps_taken, maximum=MAX_STEPS, why="one scheduler step each"
    )
    weight = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([weight], lr=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    lrs = []
    for _ in range(steps_taken):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()  # no gradient: nothing moves, but the scheduler sees the usual order
        sched.step()
    return lrs


def linear_warmup(total_steps: int, warmup_steps: int):
    """`step -> factor` for LambdaLR: (step + 1) / warmup up to the peak, then linear to 0 at
    total_steps (0 afterwards). Lesson 10."""
    total = positive_int("total_steps", total_steps)
    if not _is_int(warmup_steps):
        raise ValueError(f"warmup_steps must be an integer, got {warmup_steps!r}")
    warmup_steps = int(warmup_steps)
    if not 0 <= warmup_steps < total:
        raise ValueError(f"warmup_steps must be in [0, {total}), got {warmup_steps}")

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / (total_steps - warmup_steps))

    return factor
