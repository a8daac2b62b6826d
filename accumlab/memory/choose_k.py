"""Choosing k (lesson 05): the largest micro-batch that fits a memory budget, and the number of
accumulation steps it implies for a target global batch. On a GPU, by trying real steps and
catching out-of-memory errors (as Accelerate's `find_executable_batch_size` does); elsewhere, from
the floor plus the exactly measured saved-activation bytes."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from .._validate import one_of, positive_int
from ..data import Data
from ..optim import make_optimizer
from .parts import activation_bytes, grad_bytes, optimizer_state_bytes, param_bytes
from .step import device_of, train_step


@dataclass(frozen=True)
class Choice:
    """The micro-batch size picked, the k it implies (global batch = micro-batch × k), and how."""

    micro_batch_size: int
    accumulation_steps: int
    global_batch: int
    budget_bytes: int
    floor_bytes: int
    method: str  # "estimate" (floor + saved activations) or "probe" (real steps on the GPU)
    tried: list[tuple[int, bool]] = field(default_factory=list)  # (micro-batch size, fitted?)

    def __str__(self) -> str:
        return (
            f"micro_batch_size={self.micro_batch_size}, k={self.accumulation_steps} "
            f"(global batch {self.global_batch}, budget {self.budget_bytes:,} B, "
            f"floor {self.floor_bytes:,} B, by {self.method})"
        )


def candidate_sizes(global_batch: int) -> list[int]:
    """Divisors of the global batch, largest first: every micro-batch then has the same size, so
    `loss / k` weighs every sample equally (lesson 03)."""
    positive_int("global_batch", global_batch)
    return [m for m in range(global_batch, 0, -1) if global_batch % m == 0]


def floor_bytes(model: nn.Module, optimizer: str = "adam") -> int:
    """Parameters + gradients + optimizer state: memory no micro-batch size can remove."""
    return param_bytes(model) + grad_bytes(model) + optimizer_state_bytes(model, optimizer)


def _check_budget(budget_bytes: int, floor: int) -> None:
    if budget_bytes < floor:
        raise ValueError(
            f"budget_bytes={budget_bytes:,} is {floor - budget_bytes:,} bytes below the floor of "
            f"{floor:,} bytes (parameters + gradients + optimizer state), which no micro-batch "
            f"size can remove: raise the budget or use a smaller model or a lighter optimizer"
        )


def free_cuda_cache() -> None:
    """After an out-of-memory error: drop Python references, then hand cached blocks back."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def probe(
    candidates: list[int],
    attempt: Callable[[int], object],
    *,
    on_oom: Callable[[], None] = free_cuda_cache,
) -> tuple[int | None, list[tuple[int, bool]]]:
    """Try `attempt(m)` for each candidate, largest first; an out-of-memory error is caught, the
    cache freed, and the next (smaller) candidate tried. Any other error propagates. Returns the
    first size that ran (None if none did) and the list of (size, fitted?) tried."""
    tried = []
    for m in candidates:
        fitted = True
        try:
            attempt(m)
        except torch.OutOfMemoryError:
            fitted = (
                False  # free only after the except block: its traceback holds the step's tensors
            )
        tried.append((m, fitted))
        if fitted:
            return m, tried
        on_oom()
    return None, tried


def _estimate(model, data, global_batch, budget_bytes, floor, loss, segments) -> Choice:
    tried = []
    for m in candidate_sizes(global_batch):
        need = floor + activation_bytes(
            model, data.micro_batches(m)[0], segments=segments, loss=loss
        )
        tried.append((m, need <= budget_bytes))
        if need <= budget_bytes:
            return Choice(
                m, global_batch // m, global_batch, budget_bytes, floor, "estimate", tried
            )
    raise ValueError(
        f"budget_bytes={budget_bytes:,} is {need - budget_bytes:,} bytes short of the {need:,} "
        f"bytes even micro_batch_size=1 needs (floor {floor:,} + its saved activations)"
    )


def _probe_gpu(model, data, global_batch, budget_bytes, floor, optimizer, loss, segments) -> Choice:
    from .checkpointing import checkpointed

    device = device_of(model)
    total = torch.cuda.get_device_properties(device).total_memory
    if budget_bytes > total:
        raise ValueError(
            f"budget_bytes={budget_bytes:,} exceeds the {total:,} bytes of {torch.cuda.get_device_name(device)}"
        )
    data = data.to(device)

    # trials train `model` itself, so the GPU holds exactly what real training would (a copy on
    # the GPU would count the parameters twice); its weights are restored from a CPU backup after
    backup = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}

    def attempt(m: int) -> None:
        opt = make_optimizer(optimizer, model.parameters())
        try:
            train_step(checkpointed(model, segments), opt, data.micro_batches(m), loss)
            torch.cuda.synchronize(device)
        finally:
            model.zero_grad(set_to_none=True)
            del opt

    free_cuda_cache()
    # the allocator raises OutOfMemoryError past this fraction of the device: the budget, enforced
    torch.cuda.set_per_process_memory_fraction(budget_bytes / total, device)
    try:
        m, tried = probe(candidate_sizes(global_batch), attempt)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, device)
        model.load_state_dict(backup)
        free_cuda_cache()
    if m is None:
        raise ValueError(
            f"budget_bytes={budget_bytes:,}: even micro_batch_size=1 ran out of memory on {torch.cuda.get_device_name(device)} (floor {floor:,} bytes)"
        )
    return Choice(m, global_batch // m, global_batch, budget_bytes, floor, "probe", tried)


def choose_micro_batch(
    model: nn.Module,
    data: Data,
    budget_bytes: int,
    *,
    global_batch: int | None = None,
    optimizer: str = "adam",
    loss="mse",
    segments: int = 0,
    method: str = "auto",
) -> Choice:
    """The largest micro-batch size dividing `global_batch` (default `len(data)`) whose training
    step fits in `budget_bytes`, and k = global_batch / micro_batch_size. Lesson 05.

    method="estimate": floor + saved-activation bytes of one micro-batch must fit (any device; the
    kernels' temporary workspace is not counted). method="probe" (CUDA only): run real steps under
    a memory cap of `budget_bytes`, catching out-of-memory errors. "auto": probe on a GPU model.
    A budget below the floor is a ValueError saying by how much, before any search.
    """
    positive_int("budget_bytes", budget_bytes)
    one_of("method", method, ("auto", "estimate", "probe"))
    global_batch = len(data) if global_batch is None else positive_int("global_batch", global_batch)
    if global_batch > len(data):
        raise ValueError(
            f"global_batch must be at most the {len(data)} samples in data, got {global_batch}"
        )
    data = data[:global_batch]
    floor = floor_bytes(model, optimizer)
    _check_budget(budget_bytes, floor)
    on_gpu = device_of(model).type == "cuda"
    if method == "auto":
        method = "probe" if on_gpu else "estimate"
    if method == "probe":
        if not on_gpu:
            raise ValueError(
                f"method='probe' needs the model on a CUDA device, got {device_of(model)}"
            )
        return _probe_gpu(model, data, global_batch, budget_bytes, floor, optimizer, loss, segments)
    return _estimate(
        model, data.to(device_of(model)), global_batch, budget_bytes, floor, loss, segments
    )
