"""The few calls that differ between a CUDA GPU and the CPU, behind one interface (lessons 05–07).

Recorders and the GPU branches of the lessons call these instead of `torch.cuda.*`, so the same
code also runs on a CPU (the "CPU stand-in" the tests use): whatever a GPU run will execute has
already executed somewhere.

- `synchronize(device)`: wait for queued GPU work (a CPU has nothing queued);
- `MemoryMeter(device)`: bytes allocated above the moment it started, now and at most. CUDA reads
  the caching allocator (`memory_allocated`, `max_memory_allocated`, and `max_memory_reserved`:
  the segments it holds from the device, which is what runs out); the CPU has no such counter, so
  a dispatch-level tracker sees every tensor storage an operation returns and when it is freed
  (a buffer a kernel allocates and frees inside itself is not seen; a GPU's allocator counts it);
- `measure_peak(fn, device)`: `fn()` under a meter;
- `run_capped(fn, device, extra_bytes)`: `fn()` allowed at most `extra_bytes` more. CUDA enforces it
  with `set_per_process_memory_fraction` (a real `torch.OutOfMemoryError`); the CPU allocator has no
  cap, so there the block runs to the end and the same error is raised after it when its peak
  passed the cap (emulated, so the caller's out-of-memory handling runs on every machine);
- `free_cache`, `total_memory`, `device_name`.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass


def as_device(device) -> torch.device:
    """`device` as a torch.device; "cuda" on a machine without one is a clear ValueError."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device must name a torch device such as 'cpu' or 'cuda', got {device!r}"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r}: no CUDA device on this machine")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be a CPU or CUDA device, got {device!r}")
    return dev


def synchronize(device) -> None:
    """Wait for queued GPU work, so a timer or a memory reading sees all of it."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_cache(device) -> None:
    """Drop unreachable Python objects, then (CUDA) hand the allocator's cached blocks back."""
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def total_memory(device) -> int:
    """Bytes of memory the device has (the machine's RAM for the CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    import psutil

    return psutil.virtual_memory().total


def device_name(device) -> str:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return f"CPU ({platform.processor() or platform.machine()})"


_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)


def _tensors(items):
    """The plain CPU tensors among an operation's arguments or results (lists and tuples opened)."""
    for t in items:
        if type(t) in _PLAIN_TYPES:
            if t.device.type == "cpu":
                yield t
        elif isinstance(t, (list, tuple)):
            yield from _tensors(t)
        elif isinstance(t, torch.Tensor) and not is_traceable_wrapper_subclass(t):
            # other subclasses with storage of their own; DTensor & co. are seen through their parts
            if t.device.type == "cpu":
                yield t


class _CpuStorages(TorchDispatchMode):
    """Every CPU storage an operation creates, counted until it is freed (a weak reference to the
    storage fires then). Storages that existed before are counted out when they are freed."""

    def __init__(self):
        super().__init__()
        self.known: dict[int, weakref.ref] = {}  # id(storage) -> weak reference
        self.now = 0
        self.peak = 0

    def _gone(self, key: int, nbytes: int) -> None:
        self.known.pop(key, None)
        self.now -= nbytes

    def _see(self, t: torch.Tensor, created: bool) -> None:
        storage = t.untyped_storage()
        key = id(storage)
        if key in self.known and self.known[key]() is storage:
            return
        nbytes = storage.nbytes()
        self.known[key] = weakref.ref(storage, lambda _, k=key, n=nbytes: self._gone(k, n))
        if created:
            self.now += nbytes
            self.peak = max(self.peak, self.now)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for a in _tensors(args):
            self._see(a, created=False)  # existing storages: freeing them lowers the count
        for a in _tensors(kwargs.values()):
            self._see(a, created=False)
        out = func(*args, **kwargs)
        for o in _tensors(out if isinstance(out, (list, tuple)) else (out,)):
            self._see(o, created=True)
        return out


class MemoryMeter:
    """`with MemoryMeter(device) as m: ...` then `m.now()` and `m.peak`: bytes allocated above the
    start (CUDA: the caching allocator's own counters; CPU: every storage operations return).
    On CUDA, `m.start` and `m.start_reserved` are the allocator's allocated and reserved bytes
    when the block began. CUDA's peak counters are the process's own, one set per device: the
    meter resets them as it starts (and in `restart_peak`), for every reader of them."""

    def __init__(self, device):
        self.device = torch.device(device)
        self._cpu: _CpuStorages | None = None
        self.start = 0
        self._peak = 0
        self.start_reserved = 0
        self._peak_reserved: int | None = None

    def __enter__(self) -> MemoryMeter:
        if self.device.type == "cuda":
            synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.start = torch.cuda.memory_allocated(self.device)
            self.start_reserved = torch.cuda.memory_reserved(self.device)
            self._peak_reserved = None
        else:
            self._cpu = _CpuStorages()
            self._cpu.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            synchronize(self.device)
            self._peak = torch.cuda.max_memory_allocated(self.device) - self.start
            self._peak_reserved = self.peak_reserved
        else:
            self._cpu.__exit__(*exc)

    def restart_peak(self) -> None:
        """Let the high point start again from what is allocated now (bytes stay counted from the
        block's start): the peak of one window of a loop, say, not of every window so far."""
        if self.device.type == "cuda":
            synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._cpu.peak = self._cpu.now

    def now(self) -> int:
        """Bytes allocated now, above the start (negative when more was freed than allocated)."""
        if self.device.type == "cuda":
            synchronize(self.device)
            return torch.cuda.memory_allocated(self.device) - self.start
        return self._cpu.now

    @property
    def peak(self) -> int:
        """The most bytes allocated at once above the start (so far, or over the whole block)."""
        if self.device.type == "cuda":
            synchronize(self.device)
            return max(self._peak, torch.cuda.max_memory_allocated(self.device) - self.start)
        return self._cpu.peak

    @property
    def peak_reserved(self) -> int | None:
        """CUDA: the most bytes the caching allocator held in segments at once, above what it held
        at the start. Blocks are rounded up to 512 bytes and cut from segments of 2 MiB, 20 MiB or
        their own size rounded to 2 MiB, and freed blocks stay cached, so this can be well above
        `peak` (or below it, when the block fitted in room that segments already had). None on
        the CPU, which keeps no such cache."""
        if self.device.type != "cuda":
            return None
        if self._peak_reserved is not None:
            return self._peak_reserved
        synchronize(self.device)
        return torch.cuda.max_memory_reserved(self.device) - self.start_reserved


@dataclass(frozen=True)
class Peak:
    """Bytes allocated above the start of a measured call: at most (`peak`) and when it returned;
    on CUDA also the most reserved in the allocator's segments above the start (`reserved`)."""

    peak: int
    end: int
    device: str
    reserved: int | None = None


def measure_peak(fn: Callable[[], object], device) -> tuple[object, Peak]:
    """Run `fn()`; return its result and the `Peak` of what it allocated on `device`."""
    with MemoryMeter(device) as meter:
        result = fn()
        end = meter.now()
    return result, Peak(meter.peak, end, str(torch.device(device)), meter.peak_reserved)


def run_capped(fn: Callable[[], object], device, extra_bytes: int) -> tuple[object, Peak]:
    """`measure_peak(fn, device)` with at most `extra_bytes` more allocated than at the start;
    past it, torch.OutOfMemoryError (real on CUDA, raised after the block on the CPU)."""
    device = torch.device(device)
    if device.type != "cuda":
        result, peak = measure_peak(fn, device)
        if peak.peak > extra_bytes:
            err = torch.OutOfMemoryError(
                f"CPU stand-in for an out-of-memory error: the block allocated {peak.peak:,} bytes "
                f"above its start, past the cap of {extra_bytes:,} (the CPU allocator has no cap, "
                "so the block ran to its end and the error is raised after it)"
            )
            err.peak_bytes = peak.peak  # known here, unlike after a real out-of-memory error
            raise err
        return result, peak
    free_cache(device)
    total = total_memory(device)
    # the fraction caps memory the allocator RESERVES: what it holds now plus the allowance,
    # never above a cap the caller set, which is put back afterwards
    before = torch.cuda.get_per_process_memory_fraction(device)
    fraction = min(before, (torch.cuda.memory_reserved(device) + extra_bytes) / total)
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    try:
        return measure_peak(fn, device)
    finally:
        torch.cuda.set_per_process_memory_fraction(before, device)
