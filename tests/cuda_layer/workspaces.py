"""A MODEL of cuBLAS's first-use workspaces, not cuBLAS: on a real GPU a handle's first matrix
product takes its workspace from the caching allocator and keeps it, one per (thread, stream)
(`cublas_handle_stream_to_workspace` in ATen/cuda/CUDAContextLight.h), and backward runs on
autograd's own device thread. Here, entered before a `SimulatedGpu` so that it sees each call
first, the first matrix product on the GPU of each thread, and of backward, takes `nbytes` from the
simulated allocator and never gives them back. The size and the trigger are a model."""

from __future__ import annotations

import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# matrix products that take a cuBLAS handle on a real GPU
MATMULS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addmv", "aten::mv"}


class FirstMatmulWorkspace(TorchDispatchMode):
    def __init__(self, gpu, nbytes: int):
        super().__init__()
        self.gpu, self.nbytes = gpu, nbytes
        self.blocks: dict[tuple[int, bool], object] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if func._schema.name in MATMULS and any(self.gpu.on_gpu(t) for t in tensors):
            key = (threading.get_ident(), torch._C._current_autograd_node() is not None)
            if key not in self.blocks:
                self.blocks[key] = self.gpu.allocator.malloc(self.nbytes)
        return func(*args, **(kwargs or {}))
