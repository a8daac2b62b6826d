"""A simulated CUDA caching allocator: the arithmetic of PyTorch's `CUDACachingAllocator.cpp`,
without a GPU, so that tests can execute the CUDA branches of accumlab's memory code.

What it keeps from the real allocator (c10/cuda/CUDACachingAllocator.cpp, torch 2.x):
- every request is rounded up to a multiple of 512 bytes (`kMinBlockSize`);
- blocks of at most 1 MiB (`kSmallSize`) come from 2 MiB segments (`kSmallBuffer`); larger ones
  from 20 MiB segments (`kLargeBuffer`) below 10 MiB (`kMinLargeAlloc`), else from a segment of
  their own size rounded up to 2 MiB (`kRoundLarge`);
- a free block is reused best-fit within its pool and split when the rest is worth keeping (small
  pool: at least 512 bytes; large pool: more than 1 MiB); an unsplit block counts whole in
  `memory_allocated`; freed blocks merge with free neighbours and stay *reserved* (cached);
- a new segment that would take reserved memory past the per-process fraction (or the device's
  capacity) first releases every fully free cached segment, then raises `torch.OutOfMemoryError`;
- `empty_cache()` releases fully free segments only: a segment with one live block stays.

What it leaves out: streams and events (a block is free as soon as its tensor is), expandable
segments, the CUDA context's own memory unless given as `context_bytes`, and any timing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

KB, MB = 1024, 1024 * 1024
MIN_BLOCK = 512  # kMinBlockSize: every request is rounded up to a multiple of this
SMALL_SIZE = 1 * MB  # kSmallSize: largest request served from the small pool
SMALL_BUFFER = 2 * MB  # kSmallBuffer: segment size of the small pool
LARGE_BUFFER = 20 * MB  # kLargeBuffer: segment size for large requests below MIN_LARGE_ALLOC
MIN_LARGE_ALLOC = 10 * MB  # kMinLargeAlloc
ROUND_LARGE = 2 * MB  # kRoundLarge: larger requests get a segment of their size rounded to this


def round_size(nbytes: int) -> int:
    """Bytes the allocator hands out for a request of `nbytes` (0 stays 0: no allocation)."""
    if nbytes <= 0:
        return 0
    return max(MIN_BLOCK, math.ceil(nbytes / MIN_BLOCK) * MIN_BLOCK)


def segment_size(size: int) -> int:
    """Bytes reserved from the device (one cudaMalloc) when no cached block fits `size`."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return math.ceil(size / ROUND_LARGE) * ROUND_LARGE


def describe(nbytes: float) -> str:
    """Bytes as the real out-of-memory message writes them ("20.00 MiB")."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{int(nbytes)} bytes"


@dataclass(eq=False)
class Block:
    segment: Segment
    offset: int
    size: int
    free: bool = True


@dataclass(eq=False)
class Segment:
    size: int
    small: bool
    blocks: list[Block] = field(default_factory=list)

    def all_free(self) -> bool:
        return all(b.free for b in self.blocks)


class CachingAllocator:
    """One simulated device's allocator: `malloc(nbytes) -> Block`, `free(block)`, the counters
    `torch.cuda.memory_*` read, `empty_cache()` and the per-process fraction."""

    def __init__(self, total_memory: int, context_bytes: int = 0, device_index: int = 0):
        self.total_memory = total_memory
        self.context_bytes = context_bytes  # the CUDA context: used, but never reserved
        self.device_index = device_index
        self.fraction: float | None = None  # None: no set_per_process_memory_fraction call yet
        self.segments: list[Segment] = []
        self.allocated = 0
        self.reserved = 0
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.num_ooms = 0
        self.num_alloc_retries = 0
        self.history: list[dict] | None = None  # _record_memory_history: a trace of events

    # ------------------------------------------------------------------ limits
    @property
    def limit(self) -> int:
        """Most bytes the allocator may reserve: the device's capacity less the context, or the
        per-process fraction of the capacity once one is set."""
        usable = self.total_memory - self.context_bytes
        if self.fraction is None:
            return usable
        return min(usable, int(self.fraction * self.total_memory))

    def set_fraction(self, fraction: float) -> None:
        if not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
            raise ValueError(f"invalid fraction: {fraction}. Please set within [0, 1].")
        self.fraction = float(fraction)

    # ------------------------------------------------------------------ allocation
    def malloc(self, nbytes: int) -> Block | None:
        size = round_size(nbytes)
        if size == 0:
            return None  # a zero-byte tensor allocates nothing, as on CUDA
        block = self._best_fit(size) or self._new_segment(size, nbytes)
        rest = block.size - size
        # split when the remainder is worth keeping: small pool, any block; large pool, > 1 MiB
        if rest >= MIN_BLOCK if block.segment.small else rest > SMALL_SIZE:
            tail = Block(block.segment, block.offset + size, rest, free=True)
            blocks = block.segment.blocks
            blocks.insert(blocks.index(block) + 1, tail)
            block.size = size
        block.free = False
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self._trace("alloc", block.size)
        return block

    def free(self, block: Block | None) -> None:
        if block is None or block.free:
            return
        block.free = True
        self.allocated -= block.size
        self._trace("free_completed", block.size)
        blocks = block.segment.blocks
        i = blocks.index(block)
        if i + 1 < len(blocks) and blocks[i + 1].free:  # merge with the free block after it
            block.size += blocks.pop(i + 1).size
        if i > 0 and blocks[i - 1].free:  # and with the one before it
            before = blocks[i - 1]
            before.size += blocks.pop(i).size

    def _best_fit(self, size: int) -> Block | None:
        small = size <= SMALL_SIZE
        fits = [
            b
            for s in self.segments
            if s.small == small
            for b in s.blocks
            if b.free and b.size >= size
        ]
        return min(fits, key=lambda b: b.size, default=None)

    def _new_segment(self, size: int, nbytes: int) -> Block:
        seg_bytes = segment_size(size)
        if self.reserved + seg_bytes > self.limit:
            self.num_alloc_retries += 1
            self.empty_cache()  # release_cached_blocks(), then try once more
        if self.reserved + seg_bytes > self.limit:
            self.num_ooms += 1
            raise torch.OutOfMemoryError(self._oom_message(nbytes))
        segment = Segment(seg_bytes, small=size <= SMALL_SIZE)
        segment.blocks.append(Block(segment, 0, seg_bytes, free=True))
        self.segments.append(segment)
        self.reserved += seg_bytes
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self._trace("segment_alloc", seg_bytes)
        return segment.blocks[0]

    def empty_cache(self) -> None:
        """Hand every fully free segment back to the device; cached parts of others stay."""
        keep = []
        for s in self.segments:
            if s.all_free():
                self.reserved -= s.size
                self._trace("segment_free", s.size)
            else:
                keep.append(s)
        self.segments = keep

    def reset_peaks(self) -> None:
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    # ------------------------------------------------------------------ reports
    def _oom_message(self, nbytes: int) -> str:
        free = self.total_memory - self.context_bytes - self.reserved
        msg = (
            f"CUDA out of memory. Tried to allocate {describe(round_size(nbytes))}. "
            f"GPU {self.device_index} has a total capacity of {describe(self.total_memory)} of "
            f"which {describe(free)} is free. "
        )
        if self.fraction is not None:
            msg += (
                f"The per-process memory fraction {self.fraction:.4f} allows "
                f"{describe(self.limit)}. "
            )
        return msg + (
            f"Of the allocated memory {describe(self.allocated)} is allocated by PyTorch, and "
            f"{describe(self.reserved - self.allocated)} is reserved by PyTorch but unallocated. "
            "(simulated allocator: tests/cuda_layer)"
        )

    def stats(self) -> dict[str, int]:
        """The keys of `torch.cuda.memory_stats()` that accumlab and its tests read."""
        return {
            "allocated_bytes.all.current": self.allocated,
            "allocated_bytes.all.peak": self.peak_allocated,
            "reserved_bytes.all.current": self.reserved,
            "reserved_bytes.all.peak": self.peak_reserved,
            "active_bytes.all.current": self.allocated,
            "segment.all.current": len(self.segments),
            "num_alloc_retries": self.num_alloc_retries,
            "num_ooms": self.num_ooms,
        }

    def snapshot(self) -> dict:
        """What `torch.cuda.memory._snapshot()` returns, in its shape: segments with their
        blocks, and the recorded trace when history is on."""
        segments = [
            {
                "device": self.device_index,
                "total_size": s.size,
                "allocated_size": sum(b.size for b in s.blocks if not b.free),
                "segment_type": "small" if s.small else "large",
                "blocks": [
                    {"size": b.size, "state": "inactive" if b.free else "active_allocated"}
                    for b in s.blocks
                ],
            }
            for s in self.segments
        ]
        return {"segments": segments, "device_traces": [list(self.history or [])]}

    def _trace(self, action: str, size: int) -> None:
        if self.history is not None:
            self.history.append({"action": action, "size": size})
