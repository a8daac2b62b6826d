"""Gradient norms for `AccumulationNoise` (lesson 13), read with few host syncs: squared norms
summed on the gradients' device, read back once per device, and the data-parallel world size."""

from __future__ import annotations

import torch


def _ranks(ranks: int | None) -> int:
    """`ranks`, or 1 when no process group of more than one process is initialised."""
    import torch.distributed as dist

    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    if ranks is None and world > 1:
        raise ValueError(
            f"ranks must be given under data parallelism: a process group of {world} processes "
            "is initialised, and .grad holds the mean over the ranks that DDP averages (pass "
            f"ranks={world} for DDP over all of them, ranks=1 if .grad is not all-reduced)"
        )
    return 1 if ranks is None else ranks


def _sq_norm(grad: torch.Tensor) -> torch.Tensor:
    """|grad|² as a 0-d float64 tensor on grad's device, without a float64 copy of grad."""
    # half and bfloat16 reduce in float32 (vector_norm's dtype); float32/float64 in their own
    dtype = torch.float32 if grad.dtype in (torch.float16, torch.bfloat16) else grad.dtype
    return torch.linalg.vector_norm(grad.detach(), dtype=dtype).double().square()


def _any_nonzero(grads) -> bool:
    """Whether any of `grads` holds a non-zero: one host sync per device, not one per tensor."""
    by_device: dict = {}
    for g in grads:
        by_device.setdefault(g.device, []).append(g.any())
    return any(bool(torch.stack(vs).any()) for vs in by_device.values())


def _host_sum(values) -> float:
    """Σ of 0-d tensors, read back once per device."""
    by_device: dict = {}
    for v in values:
        by_device.setdefault(v.device, []).append(v)
    return sum(float(torch.stack(vs).sum()) for vs in by_device.values())
