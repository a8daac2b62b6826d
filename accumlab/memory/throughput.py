"""What accumulation costs in time (lesson 05): seconds per optimizer step against the micro-batch
size at a fixed global batch, and gradient checkpointing's memory/time trade-off. Timings are
shown, never asserted: they depend on the machine and on what else runs on it."""

from __future__ import annotations

import copy
import statistics
import time

from torch import nn

from .. import _validate
from .._validate import positive_int
from ..data import Data
from ..device import synchronize
from .checkpointing import checkpointed
from .parts import activation_bytes, grad_bytes, optimizer_state_bytes, param_bytes
from .peaks import step_peak_bytes, step_transient_bytes
from .step import device_of, memory_optimizer, train_step

MAX_REPEATS = 100  # a timing is a median of a few steps; more only makes a lesson wait


def time_step(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    optimizer: str = "adam",
    segments: int = 0,
    loss="mse",
    repeats: int = 3,
    warmup: int = 1,
    foreach: bool | None = True,
) -> float:
    """Median wall-clock seconds of one optimizer step over all of `data` (the global batch) in
    micro-batches of `micro_batch_size`, on a copy of `model`, after `warmup` untimed steps."""
    return statistics.median(
        step_times(
            model, data, micro_batch_size, optimizer=optimizer, segments=segments, loss=loss,
            repeats=repeats, warmup=warmup, foreach=foreach,
        )
    )  # fmt: skip


def step_times(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    optimizer: str = "adam",
    segments: int = 0,
    loss="mse",
    repeats: int = 3,
    warmup: int = 1,
    foreach: bool | None = True,
) -> list[float]:
    """`time_step`'s `repeats` timings themselves, in the order they ran (their spread shows how
    much a busy machine moved them)."""
    _validate.model("model", model)
    _validate.data("data", data)
    for name, value in (("repeats", repeats), ("warmup", warmup)):
        positive_int(name, value, minimum=0 if name == "warmup" else 1)
        if value > MAX_REPEATS:
            raise ValueError(f"{name} must be at most {MAX_REPEATS}, got {value}")
    model = copy.deepcopy(model)
    device = device_of(model)
    net = checkpointed(model, segments)
    opt = memory_optimizer(model, optimizer, foreach=foreach)
    micro = data.micro_batches(micro_batch_size)  # host memory: train_step copies each one over
    for _ in range(warmup):  # first steps allocate optimizer state and warm caches: not timed
        train_step(net, opt, micro, loss)
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        train_step(net, opt, micro, loss)
        synchronize(device)  # GPU kernels run asynchronously: wait before reading the clock
        times.append(time.perf_counter() - start)
    return times


def step_time_sweep(
    model: nn.Module,
    data: Data,
    micro_sizes: list[int],
    *,
    optimizer: str = "adam",
    segments: int = 0,
    loss="mse",
    repeats: int = 3,
    progress: bool = True,
) -> dict:
    """Seconds per optimizer step for each micro-batch size, at the global batch `len(data)`."""
    from tqdm.auto import tqdm

    _validate.model("model", model)
    _validate.data("data", data)
    samples = "the number of samples in data"
    sizes = _validate.positive_ints("micro_sizes", micro_sizes, maximum=len(data), why=samples)
    seconds = [
        time_step(
            model, data, m, optimizer=optimizer, segments=segments, loss=loss, repeats=repeats
        )
        for m in tqdm(sizes, desc="timing micro-batch sizes", disable=not progress)
    ]
    return {
        "global_batch": len(data),
        "micro_sizes": sizes,
        "accumulation_steps": [-(-len(data) // m) for m in sizes],
        "seconds": seconds,
        "samples_per_second": [len(data) / s for s in seconds],
        "optimizer": optimizer,
        "segments": segments,
        "device": str(device_of(model)),
    }


def checkpoint_comparison(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    segments: int,
    *,
    optimizer: str = "adam",
    loss="mse",
    repeats: int = 3,
    progress: bool = True,
) -> dict:
    """Four ways to train on the global batch `len(data)`: plain, checkpointing only, accumulation
    only (micro-batches of `micro_batch_size`), and both. For each: saved-activation bytes, seconds
    per optimizer step, and the measured peak of a step (resting memory included; on a CPU from
    the storage tracker, on a GPU from the allocator). Lesson 05."""
    from tqdm.auto import tqdm

    _validate.model("model", model)
    _validate.data("data", data)
    segments = positive_int("segments", segments, minimum=2)
    positive_int(
        "micro_batch_size", micro_batch_size, maximum=len(data), why="the number of samples in data"
    )
    n = len(data)
    configs = [
        ("plain", n, 0),
        ("checkpointing", n, segments),
        ("accumulation", micro_batch_size, 0),
        ("both", micro_batch_size, segments),
    ]
    rows = []
    resting = param_bytes(model) + optimizer_state_bytes(model, optimizer)
    for name, mb, seg in tqdm(configs, desc="checkpointing vs accumulation", disable=not progress):
        rows.append(
            {
                "name": name,
                "micro_batch_size": mb,
                "accumulation_steps": -(-n // mb),
                "segments": seg,
                "activations": activation_bytes(
                    model, data.micro_batches(mb)[0], segments=seg, loss=loss
                ),
                "seconds": time_step(
                    model, data, mb, optimizer=optimizer, segments=seg, loss=loss, repeats=repeats
                ),
                "peak": resting
                + step_peak_bytes(model, data, mb, optimizer=optimizer, segments=seg, loss=loss),
            }
        )
    return {
        "global_batch": n,
        "resting": resting,
        # what optimizer.step() holds whatever the micro-batch or checkpointing: peaks stop there
        "floor": resting + grad_bytes(model) + step_transient_bytes(model, optimizer),
        "rows": rows,
        "optimizer": optimizer,
        "device": str(device_of(model)),
    }
