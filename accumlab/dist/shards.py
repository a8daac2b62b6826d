"""How a global batch is split across ranks and micro-steps (lesson 07).

Micro-step i of rank r holds samples [(i·R + r)·m, (i·R + r + 1)·m) for R ranks and micro-batch m,
so micro-step i of ALL ranks together is the contiguous slice [i·R·m, (i+1)·R·m): the single-process
reference can replay exactly the same samples.
"""

from __future__ import annotations

from .._validate import positive_int
from ..data import Data


def shard(data: Data, rank: int, world_size: int, micro_step: int, micro_batch: int) -> Data:
    """The micro-batch rank `rank` sees at micro-step `micro_step`."""
    positive_int("world_size", world_size)
    positive_int("micro_batch", micro_batch)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank!r}")
    start = (micro_step * world_size + rank) * micro_batch
    if micro_step < 0 or start + micro_batch > len(data):
        raise ValueError(
            f"micro_step={micro_step} needs samples up to {start + micro_batch}, data has {len(data)}"
        )
    return data[start : start + micro_batch]


def global_micro_step(data: Data, world_size: int, micro_step: int, micro_batch: int) -> Data:
    """Micro-step `micro_step` of every rank together (what one process would see)."""
    size = world_size * micro_batch
    return data[micro_step * size : (micro_step + 1) * size]
