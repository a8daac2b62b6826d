"""Which tensors live on the simulated GPU, and the memory they take there.

A simulated GPU tensor is a real CPU tensor whose storage the layer has marked: `t.device` says
`cuda:0`, its bytes are counted by the simulated allocator while the storage lives, and mixing it
with a CPU tensor raises as CUDA does. Two modes do the work:

- `DeviceMoves` (a TorchFunctionMode) sees every Python-level torch call: it turns `device="cuda"`
  into the CPU, makes `.to("cuda")` / `.cuda()` / `.to("cpu")` / `.cpu()` COPY (as on a GPU, so
  `model.to("cuda")` allocates) and returns the tensor itself when it is already there, and
  remembers where the call's new tensors belong;
- `Allocations` (a TorchDispatchMode) sees every ATen operation, forward and backward: a new
  storage is on the GPU when the call asked for the GPU, or when the operation read a GPU tensor.
  Factory calls made by C++ outside any Python-level torch call (DDP's `Reducer` building its
  buckets) have no visible template; they land where `cpp_factories` says (default: the GPU).
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

_REAL_DEVICE = torch._C.TensorBase.device  # the C-level getter: where the bytes really are

# operations that may take tensors on two devices (a copy between them, CPU indices)
_CROSS_DEVICE = {
    "aten::copy_",
    "aten::_to_copy",
    "aten::copy",
    "aten::index.Tensor",
    "aten::index_put_",
    "aten::_index_put_impl_",
    "aten::set_",
    "aten::_has_compatible_shallow_copy_type",
    "aten::lift_fresh",
}


def _tensors(obj, out: list) -> list:
    """The tensors inside an operation's arguments or results (tuples, lists, dicts opened)."""
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _tensors(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _tensors(o, out)
    return out


def _storage(t: torch.Tensor):
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse, wrapper subclasses: no plain storage
        return None


class Tracker:
    """The storages on the simulated GPU, each with its allocator block."""

    def __init__(self, allocator, cpp_factories: str = "cuda"):
        self.allocator = allocator
        self.cpp_factories_on_gpu = cpp_factories == "cuda"
        self._blocks: dict[int, tuple[weakref.ref, object]] = {}
        self.frames = threading.local()

    # ------------------------------------------------------------------ storages
    def on_gpu(self, t: torch.Tensor) -> bool:
        s = _storage(t)
        if s is None:
            return False
        entry = self._blocks.get(id(s))
        return entry is not None and entry[0]() is s

    def add(self, storage) -> None:
        key = id(storage)
        block = self.allocator.malloc(storage.nbytes())  # may raise torch.OutOfMemoryError
        self._blocks[key] = (weakref.ref(storage, lambda _, k=key: self._gone(k)), block)

    def _gone(self, key: int) -> None:
        entry = self._blocks.pop(key, None)
        if entry is not None:
            self.allocator.free(entry[1])

    # ------------------------------------------------------------------ call frames
    def stack(self) -> list:
        if not hasattr(self.frames, "stack"):
            self.frames.stack = []
        return self.frames.stack

    @contextmanager
    def frame(self, gpu: bool | None, args_on_gpu: bool):
        """A Python-level call: `gpu` True/False when it named a device, None when it did not;
        `args_on_gpu` whether any tensor it received is on the GPU."""
        stack = self.stack()
        stack.append((gpu, args_on_gpu))
        try:
            yield
        finally:
            stack.pop()


_PARSERS = (torch._C._nn._parse_to, torch.device)


def _parse_device(value) -> torch.device | None:
    if value is None:
        return None
    if isinstance(value, int):
        return torch.device("cuda", value)  # torch reads a bare int as a CUDA ordinal
    return torch.device(value)


class DeviceMoves(TorchFunctionMode):
    """Python-level calls: "cuda" becomes the CPU plus a mark; moves copy, as between devices."""

    def __init__(self, tracker: Tracker, device_count: int):
        super().__init__()
        self.tracker = tracker
        self.device_count = device_count

    def _check(self, device: torch.device) -> bool:
        if device.type == "cuda":
            if device.index is not None and not 0 <= device.index < self.device_count:
                raise RuntimeError(
                    "CUDA error: invalid device ordinal (simulated GPU: "
                    f"{self.device_count} device(s), asked for {device})"
                )
            return True
        return False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        tracker = self.tracker
        if func is torch.Tensor.to or func is torch.Tensor.cuda or func is torch.Tensor.cpu:
            return self._move(func, args, kwargs)
        if func in _PARSERS:  # they read a device (Module.to parses its arguments): leave it be
            return func(*args, **kwargs)
        tensors = _tensors((args, kwargs), [])
        args_on_gpu = any(tracker.on_gpu(t) for t in tensors)
        gpu = None
        if "device" in kwargs and kwargs["device"] is not None:
            device = _parse_device(kwargs["device"])
            gpu = self._check(device)
            if gpu:
                kwargs["device"] = "cpu"
        with tracker.frame(gpu, args_on_gpu):
            return func(*args, **kwargs)

    def _move(self, func, args, kwargs):
        """Tensor.to / .cuda / .cpu: a copy when the device changes, the tensor when it does not."""
        tracker = self.tracker
        self_t, rest = args[0], args[1:]
        if func is torch.Tensor.cuda:
            device = _parse_device(rest[0] if rest else kwargs.pop("device", None)) or (
                torch.device("cuda", 0)
            )
            rest, dtype, copy = (), None, False
            kwargs.pop("non_blocking", None)
        elif func is torch.Tensor.cpu:
            device, rest, dtype, copy = torch.device("cpu"), (), None, False
        else:
            copy = kwargs.pop("copy", False)
            if rest and isinstance(rest[0], torch.Tensor):  # .to(other): other's device and dtype
                other = rest[0]
                device, dtype = other.device, other.dtype
                rest = rest[1:]
            else:
                device, dtype, _, _ = torch._C._nn._parse_to(*rest, **kwargs)
                kwargs.pop("device", None)
                kwargs.pop("dtype", None)
                rest = ()
            kwargs.pop("non_blocking", None)
        src_gpu = tracker.on_gpu(self_t)
        dst_gpu = src_gpu if device is None else self._check(device)
        same_dtype = dtype is None or dtype == self_t.dtype
        if dst_gpu == src_gpu and same_dtype and not copy:
            return self_t  # already there: no copy, as torch returns the tensor itself
        with tracker.frame(dst_gpu, src_gpu):
            return torch.Tensor.to(self_t, "cpu", dtype=dtype or self_t.dtype, copy=True, **kwargs)


class Allocations(TorchDispatchMode):
    """Every ATen operation: new storages on the GPU are allocated in the simulated allocator."""

    def __init__(self, tracker: Tracker):
        super().__init__()
        self.tracker = tracker

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tracker = self.tracker
        inputs = _tensors((args, kwargs), [])
        gpu_inputs = [t for t in inputs if tracker.on_gpu(t)]
        if gpu_inputs and func._schema.name not in _CROSS_DEVICE:
            cpu = [t for t in inputs if not tracker.on_gpu(t) and t.dim() > 0]
            if cpu:  # a CPU scalar (0-dim) may meet CUDA tensors; anything larger may not
                raise RuntimeError(
                    "Expected all tensors to be on the same device, but found at least two "
                    f"devices, cuda:0 and cpu! (in {func._schema.name}, simulated GPU)"
                )
        device = kwargs.get("device")
        asked = None
        if device is not None and torch.device(device).type == "cuda":
            kwargs = {**kwargs, "device": torch.device("cpu")}
            asked = True
        out = func(*args, **kwargs)
        stack = tracker.stack()
        gpu = asked
        if gpu is None and stack and stack[-1][0] is not None:
            gpu = stack[-1][0]  # the Python-level call named a device
        if gpu is None and inputs:
            gpu = bool(gpu_inputs)  # an operation on tensors: where its inputs are
        if gpu is None:  # a factory: where its Python-level call's tensors were, else C++'s
            gpu = stack[-1][1] if stack else tracker.cpp_factories_on_gpu
        if gpu:
            seen = {id(s) for s in map(_storage, inputs) if s is not None}
            for t in _tensors(out, []):
                if _REAL_DEVICE.__get__(t).type == "cpu":
                    s = _storage(t)
                    if s is not None and id(s) not in seen and not tracker.on_gpu(t):
                        seen.add(id(s))
                        tracker.add(s)
        return out


def patched_tensor_properties(tracker: Tracker):
    """`Tensor.device`, `.is_cuda`, `.is_cpu`, `.get_device()` as a GPU tensor reports them."""

    def device(self):
        real = _REAL_DEVICE.__get__(self)
        return torch.device("cuda", 0) if real.type == "cpu" and tracker.on_gpu(self) else real

    def is_cuda(self):
        return tracker.on_gpu(self)

    def is_cpu(self):
        return _REAL_DEVICE.__get__(self).type == "cpu" and not tracker.on_gpu(self)

    def get_device(self):
        return 0 if tracker.on_gpu(self) else -1

    return {
        "device": property(device),
        "is_cuda": property(is_cuda),
        "is_cpu": property(is_cpu),
        "get_device": get_device,
    }


__all__ = ["Allocations", "DeviceMoves", "Tracker", "patched_tensor_properties"]
