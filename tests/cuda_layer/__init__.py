"""A CUDA device simulated on the CPU, for tests: `with SimulatedGpu() as gpu:` (or the
`simulated_gpu` fixture) makes this process see one GPU, so that every CUDA branch of accumlab's
device code (`accumlab.device`, the memory probe, the recorders, a lesson's `if env.gpu_count:`
cells, `al.dist.choose_plan`) executes here, with CUDA's memory semantics:

- `torch.cuda.is_available()` is True, `device_count()` is `devices`, `get_device_properties(i)`
  names a device of `total_memory` bytes; `synchronize`, streams and events exist (and do nothing);
- tensors created with `device="cuda"` or moved with `.to("cuda")` / `.cuda()` are CPU tensors the
  layer marks: `t.device` is `cuda:0`, a move COPIES them (so `model.to("cuda")` allocates the
  parameters, and `.to("cpu")` gives a CPU copy), and mixing them with CPU tensors raises;
- their bytes go through a simulated caching allocator (`allocator.py`: 512-byte rounding, 2 MiB /
  20 MiB segments, cached blocks): `memory_allocated`, `memory_reserved`, `max_memory_allocated`,
  `max_memory_reserved`, `reset_peak_memory_stats`, `memory_stats`, `mem_get_info`,
  `empty_cache`, `set_per_process_memory_fraction` (a new segment past it raises
  `torch.OutOfMemoryError` at the allocation, mid-block), `memory._record_memory_history` and
  `memory._snapshot`;
- with `blaslt_workspace=N`, a modelled cuBLASLt workspace: N bytes allocated at the first
  `addmm` of more than one row on the GPU and kept for the rest of the block (Blas.cpp takes the
  cuBLASLt path only for mat1 with more than one row; the size and the trigger are a model);
- `torch.autocast("cuda")` runs as CPU autocast in float16 (CUDA's default autocast dtype), and
  `torch.amp.GradScaler("cuda")` runs its real code on the marked tensors.

What it does not prove: anything about speed, kernels (cuBLAS workspaces, fused kernels), CUDA's
own autocast op list and float16 numerics, NCCL, or memory allocated by C++ below the Python
dispatch level: a buffer a kernel allocates and frees inside itself (`F.mse_loss`'s squared
errors) is counted by a GPU's allocator and not here. `cuda_layer.workspaces` adds a model of
cuBLAS's per-thread workspaces for the tests that need one. It proves that the CUDA code paths run, read the counters they mean to read, and
count what a GPU would count (including a copy made inside a measured block).

Nothing in `accumlab/` imports this package; only tests do.
"""

from __future__ import annotations

import contextlib
import time
import types

import pytest
import torch

from .allocator import CachingAllocator
from .tensors import Allocations, DeviceMoves, Tracker, patched_tensor_properties

NAME = "Simulated GPU (tests/cuda_layer, CPU tensors)"
GiB = 2**30


class _Stream:
    def __init__(self, device=None, priority=0, **_):
        self.device = torch.device("cuda", 0)

    def synchronize(self):
        pass

    def wait_stream(self, other):
        pass

    def is_capturing(self):
        # the optimizers' CUDA-graph health check asks this of the accelerator's stream
        return False

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        event = event or _Event()
        event.record(self)
        return event

    def query(self):
        return True


class _Event:
    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def elapsed_time(self, end):
        return 1000.0 * (end.t - self.t)


class SimulatedGpu:
    """`with SimulatedGpu(total_memory=..., devices=1) as gpu:` — see the module docstring.
    `gpu.allocator` is the simulated allocator; `gpu.on_gpu(t)` says whether `t` lives there."""

    def __init__(
        self,
        total_memory: int = 16 * GiB,
        *,
        devices: int = 1,
        context_bytes: int = 0,
        cpp_factories: str = "cuda",
        name: str = NAME,
        threads: int | None = 1,
        blaslt_workspace: int = 0,
    ):
        if cpp_factories not in ("cuda", "cpu"):
            raise ValueError(f"cpp_factories must be 'cuda' or 'cpu', got {cpp_factories!r}")
        self.name = name
        self.devices = devices
        self.allocator = CachingAllocator(total_memory, context_bytes)
        self.tracker = Tracker(self.allocator, cpp_factories)
        self.tracker.workspace_bytes = blaslt_workspace
        self._saved: list[tuple[object, str, object]] = []
        self._modes: list = []
        # one torch thread by default: tiny operations on a busy 2-core machine spend far more
        # time contending for a second thread than computing (speed is never measured here)
        self.threads = threads
        self._threads_before = 0

    # ------------------------------------------------------------------ the torch.cuda API
    def _index(self, device=None) -> int:
        if device is None:
            return 0
        if isinstance(device, int):
            index = device
        else:
            d = torch.device(device)
            if d.type != "cuda":
                raise ValueError(f"Expected a cuda device, but got: {d}")
            index = d.index or 0
        if not 0 <= index < self.devices:
            raise RuntimeError(f"CUDA error: invalid device ordinal {index} (simulated GPU)")
        return index

    def _api(self) -> dict[str, object]:
        a = self.allocator

        def properties(device=None):
            self._index(device)
            return types.SimpleNamespace(
                name=self.name,
                total_memory=a.total_memory,
                major=9,
                minor=0,
                multi_processor_count=132,
                uuid="GPU-00000000-simulated",
                is_integrated=False,
            )

        def set_fraction(fraction, device=None):
            self._index(device)
            a.set_fraction(fraction)

        def rng_state(device="cuda"):
            return torch.zeros(16, dtype=torch.uint8)

        def history(enabled="all", *args, **kwargs):
            a.history = [] if enabled else None

        def idx(fn):
            return lambda device=None: (self._index(device), fn())[1]

        return {
            "is_available": lambda: True,
            "device_count": lambda: self.devices,
            "current_device": lambda: 0,
            "set_device": lambda device: self._index(device),
            "is_initialized": lambda: True,
            "init": lambda: None,
            "synchronize": lambda device=None: self._index(device),
            "get_device_properties": properties,
            "get_device_name": lambda device=None: properties(device).name,
            "get_device_capability": lambda device=None: (9, 0),
            "is_bf16_supported": lambda including_emulation=True: True,
            "memory_allocated": idx(lambda: a.allocated),
            "max_memory_allocated": idx(lambda: a.peak_allocated),
            "memory_reserved": idx(lambda: a.reserved),
            "max_memory_reserved": idx(lambda: a.peak_reserved),
            "reset_peak_memory_stats": idx(a.reset_peaks),
            "reset_max_memory_allocated": idx(a.reset_peaks),
            "memory_stats": idx(a.stats),
            "mem_get_info": idx(
                lambda: (a.total_memory - a.context_bytes - a.reserved, a.total_memory)
            ),
            "empty_cache": a.empty_cache,
            "set_per_process_memory_fraction": set_fraction,
            "get_per_process_memory_fraction": lambda device=None: (
                1.0 if a.fraction is None else a.fraction
            ),
            "get_rng_state": rng_state,
            "set_rng_state": lambda state, device="cuda": None,
            "get_rng_state_all": lambda: [rng_state() for _ in range(self.devices)],
            "set_rng_state_all": lambda states: None,
            "manual_seed": lambda seed: None,
            "manual_seed_all": lambda seed: None,
            "seed": lambda: None,
            "seed_all": lambda: None,
            "initial_seed": lambda: 0,
            "current_stream": lambda device=None: _Stream(),
            "default_stream": lambda device=None: _Stream(),
            "Stream": _Stream,
            "Event": _Event,
            "stream": lambda stream=None: contextlib.nullcontext(),
            "device": lambda device=None: contextlib.nullcontext(),
            "memory._record_memory_history": history,
            "memory._snapshot": lambda device=None: a.snapshot(),
        }

    # ------------------------------------------------------------------ entering and leaving
    def _patch(self, owner, name: str, value) -> None:
        self._saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
        setattr(owner, name, value)

    def __enter__(self) -> SimulatedGpu:
        self._threads_before = torch.get_num_threads()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        for name, value in self._api().items():
            owner = torch.cuda
            if name.startswith("memory."):
                owner, name = torch.cuda.memory, name.removeprefix("memory.")
            self._patch(owner, name, value)
        # torch.accelerator answers from the C++ build: on a CUDA build of torch (no driver here)
        # its stream and device queries reach the CUDA runtime and fail, where a CPU build never
        # asks them. Answer them as the simulated device would; on a CPU build nothing calls them.
        for name, value in {
            "current_stream": lambda device=None: _Stream(),
            "current_device_index": lambda: 0,
            "synchronize": lambda device=None: None,
        }.items():
            self._patch(torch.accelerator, name, value)
        for name, value in patched_tensor_properties(self.tracker).items():
            self._patch(torch.Tensor, name, value)
        self._patch(torch.amp.autocast_mode.autocast, "__init__", _autocast_init)
        self._modes = [DeviceMoves(self.tracker, self.devices), Allocations(self.tracker)]
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        self._modes = []
        for owner, name, old in reversed(self._saved):
            if old is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
        self._saved = []
        torch.set_num_threads(self._threads_before)

    def on_gpu(self, t: torch.Tensor) -> bool:
        return self.tracker.on_gpu(t)


_MISSING = object()
_REAL_AUTOCAST_INIT = torch.amp.autocast_mode.autocast.__init__


def _autocast_init(self, device_type, dtype=None, enabled=True, cache_enabled=None):
    # CUDA autocast's default dtype is float16; the marked tensors are CPU tensors, so the CPU's
    # autocast runs it (its op list, not CUDA's)
    if device_type == "cuda":
        device_type, dtype = "cpu", dtype or torch.float16
    _REAL_AUTOCAST_INIT(
        self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled
    )


@pytest.fixture
def simulated_gpu():
    """One simulated 16 GiB GPU for the duration of a test (see `SimulatedGpu`). A test module
    gets it with `pytest_plugins = ["cuda_layer"]`, or writes the same three lines itself."""
    with SimulatedGpu() as gpu:
        yield gpu
