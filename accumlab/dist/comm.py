"""Counting the communication data parallelism does: a DDP communication hook for all-reduce and
FSDP2 custom collectives for reduce-scatter / all-gather (lesson 07). Each call is counted with its
payload (bytes this rank sends into the collective), then the real collective runs unchanged.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

_IN_HOOK = threading.local()  # set while the counting comm hook runs (its all-reduce is counted)


@dataclass
class CommCounter:
    """Calls and bytes of one collective; `per_backward` holds the calls of each backward pass."""

    calls: int = 0
    bytes: int = 0
    per_backward: list[int] = field(default_factory=list)
    ops: set = field(default_factory=set)  # the reduce operations seen (FSDP2's reduce-scatter)
    _mark: int = 0

    def add(self, tensor) -> None:
        self.calls += 1
        self.bytes += tensor.numel() * tensor.element_size()

    def end_backward(self) -> None:
        """Close one backward pass: remember how many calls it made."""
        self.per_backward.append(self.calls - self._mark)
        self._mark = self.calls

    def as_dict(self) -> dict:
        return {"calls": self.calls, "bytes": self.bytes, "per_backward": list(self.per_backward)}


def count_allreduce(ddp, counter: CommCounter, process_group=None) -> None:
    """Register a DDP communication hook that counts every bucket all-reduce, then does it."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    def hook(group, bucket):
        counter.add(
            bucket.buffer()
        )  # the flattened gradients of one bucket: the collective's input
        _IN_HOOK.active = True
        try:  # the default hook: divide by the group's size (whatever Join says), all-reduce
            return allreduce_hook(group, bucket)
        finally:
            _IN_HOOK.active = False

    ddp.register_comm_hook(process_group, hook)


class OtherAllReduces:
    """`with OtherAllReduces(ddp) as other:` counts every `torch.distributed.all_reduce` made while
    the block runs, except the bucket all-reduces of `count_allreduce`'s hook: under `Join`, DDP's
    forward makes its own. `other.calls`: all of them; `other.per_forward`: those made during each
    forward of `ddp` that finished."""

    def __init__(self, ddp):
        self.ddp = ddp
        self.calls = 0
        self.per_forward: list[int] = []

    def __enter__(self) -> OtherAllReduces:
        import torch.distributed as dist

        self._real = real = dist.all_reduce

        def counting(*args, **kwargs):
            if not getattr(_IN_HOOK, "active", False):
                self.calls += 1
            return real(*args, **kwargs)

        dist.all_reduce = counting  # Join and DDP call it as `dist.all_reduce`
        start = [0]
        self._handles = [
            self.ddp.register_forward_pre_hook(lambda *_: start.__setitem__(0, self.calls)),
            self.ddp.register_forward_hook(
                lambda *_: self.per_forward.append(self.calls - start[0])
            ),
        ]
        return self

    def __exit__(self, *exc) -> None:
        import torch.distributed as dist

        dist.all_reduce = self._real
        for handle in self._handles:
            handle.remove()


def count_fsdp_collectives(
    model, reduce_scatter: CommCounter, all_gather: CommCounter, at_reduce_scatter=None
) -> bool:
    """Count FSDP2 reduce-scatters and all-gathers of every FSDP module in `model`; call
    `at_reduce_scatter(output_tensor, input_tensor)` just before each reduce-scatter runs.

    Uses `FSDPModule.set_custom_reduce_scatter/all_gather` (torch >= 2.8); returns False when the
    installed torch lacks them (nothing is counted then).
    """
    try:
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.fsdp._fully_shard._fsdp_collectives import (
            DefaultAllGather,
            DefaultReduceScatter,
        )
    except ImportError:
        return False

    # *args: the remaining arguments (group, op, async_op) changed between torch versions
    class CountingReduceScatter(DefaultReduceScatter):
        def __call__(self, output_tensor, input_tensor, *args, **kwargs):
            reduce_scatter.add(input_tensor)  # the unsharded gradients this rank contributes
            op = kwargs.get("op", args[1] if len(args) > 1 else None)
            reduce_scatter.ops.add(str(getattr(op, "name", op)))  # SUM, AVG, PREMUL_SUM
            if at_reduce_scatter is not None:
                at_reduce_scatter(output_tensor, input_tensor)
            return super().__call__(output_tensor, input_tensor, *args, **kwargs)

    class CountingAllGather(DefaultAllGather):
        def __call__(self, output_tensor, input_tensor, *args, **kwargs):
            all_gather.add(input_tensor)  # this rank's parameter shard
            return super().__call__(output_tensor, input_tensor, *args, **kwargs)

    modules = [m for m in model.modules() if isinstance(m, FSDPModule)]
    if not modules or not hasattr(modules[0], "set_custom_reduce_scatter"):
        return False
    for m in modules:  # not recursive: each FSDP module has its own parameter group
        m.set_custom_reduce_scatter(CountingReduceScatter())
        m.set_custom_all_gather(CountingAllGather())
    return True
