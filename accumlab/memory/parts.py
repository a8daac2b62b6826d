"""What occupies memory during training, part by part (lesson 05): parameters, gradients and
optimizer state from tensor sizes; activations saved for backward exactly, with saved-tensor
hooks; on a GPU also the peak the CUDA allocator saw during one optimizer step."""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from .._validate import positive_int
from ..data import Data, regression_data
from ..losses import Loss, get_loss
from ..models import mlp
from ..optim import make_optimizer
from ..saved import _storage_key, saved_storages
from .checkpointing import checkpointed
from .step import device_of, synchronize, train_step


def memory_setup(
    width: int = 256, depth: int = 4, global_batch: int = 256, *, seed: int = 0, device=None
):
    """The lesson's model and data: an MLP of `depth` hidden layers of `width` units (float32, as
    on a GPU) and `global_batch` samples of regression data. Returns (model, data). Lesson 05."""
    for name, value in (("width", width), ("depth", depth), ("global_batch", global_batch)):
        positive_int(name, value)
    model = mlp(
        features=width, hidden=width, outputs=width, depth=depth, seed=seed, dtype=torch.float32
    )
    data = regression_data(
        n=global_batch, features=width, outputs=width, seed=seed, dtype=torch.float32
    )
    device = torch.device(device) if device is not None else torch.device("cpu")
    return model.to(device), data.to(device)


def tensor_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors` (views of one storage count once)."""
    seen = {}
    for t in tensors:
        seen[_storage_key(t)] = t.untyped_storage().nbytes()
    return sum(seen.values())


def param_bytes(model: nn.Module) -> int:
    return tensor_bytes(model.parameters())


def grad_bytes(model: nn.Module) -> int:
    """One .grad buffer per trainable parameter, same shape and dtype: it exists from the first
    backward until zero_grad(set_to_none=True), and accumulation adds into it in place."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def optimizer_state_bytes(model: nn.Module, optimizer: str = "adam") -> int:
    """Bytes of the optimizer's state, read from a real optimizer after one step on a copy of
    `model` (state is created lazily, at the first step)."""
    model = copy.deepcopy(model)
    opt = make_optimizer(optimizer, model.parameters())
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    return tensor_bytes(
        t for state in opt.state.values() for t in state.values() if isinstance(t, torch.Tensor)
    )


def activation_bytes(
    model: nn.Module, batch: Data, *, segments: int = 0, loss: str | Loss = "mse"
) -> int:
    """Bytes kept for backward by one forward pass (and the loss) on `batch`: what autograd saves
    plus, with `segments` ≥ 2, the inputs gradient checkpointing holds. Parameters and the batch
    itself are not counted: they exist whether or not anything is saved."""
    loss_fn = get_loss(loss)
    net = checkpointed(model, segments)
    exclude = [*model.parameters(), batch.x, batch.y]
    saved = saved_storages(lambda: loss_fn(net(batch.x), batch.y), exclude)
    skip = {_storage_key(t) for t in exclude}
    held = {k: v for k, v in getattr(net, "held", {}).items() if k not in skip}
    return sum({**saved, **held}.values())


def cuda_peak_bytes(fn, device) -> int:
    """Most bytes the CUDA allocator held at once while `fn()` ran, above what was allocated before."""
    device = torch.device(device)
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


def step_peak_bytes(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    optimizer: str = "adam",
    segments: int = 0,
    loss="mse",
) -> int | None:
    """CUDA only (None elsewhere): peak memory above the resting state (parameters, optimizer state,
    data, no gradients) during one optimizer step over `data` in micro-batches. It contains the
    gradients, the saved activations and the temporary workspace of the kernels."""
    device = device_of(model)
    if device.type != "cuda":
        return None
    model = copy.deepcopy(model)
    net = checkpointed(model, segments)
    opt = make_optimizer(optimizer, model.parameters())
    micro = data.to(device).micro_batches(micro_batch_size)
    train_step(net, opt, micro, loss)  # first step creates the optimizer state: not measured
    opt.zero_grad(set_to_none=True)
    return cuda_peak_bytes(lambda: train_step(net, opt, micro, loss), device)


@dataclass(frozen=True)
class Footprint:
    """Bytes per part of training memory for one micro-batch size. `peak` is the CUDA measurement
    (see `step_peak_bytes`), None without a GPU. Lesson 05."""

    params: int
    grads: int
    optimizer_state: int
    activations: int
    peak: int | None = None

    @property
    def floor(self) -> int:
        """What accumulation cannot remove: it does not depend on the micro-batch size."""
        return self.params + self.grads + self.optimizer_state

    @property
    def total(self) -> int:
        return self.floor + self.activations

    def parts(self) -> dict[str, int]:
        return {
            "parameters": self.params,
            "gradients": self.grads,
            "optimizer state": self.optimizer_state,
            "saved activations": self.activations,
        }

    def as_dict(self) -> dict:
        return asdict(self)


def footprint(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    optimizer: str = "adam",
    segments: int = 0,
    loss="mse",
) -> Footprint:
    """The memory breakdown of training `model` on micro-batches of `micro_batch_size`. Lesson 05."""
    positive_int("micro_batch_size", micro_batch_size)
    batch = data.to(device_of(model)).micro_batches(micro_batch_size)[0]
    return Footprint(
        params=param_bytes(model),
        grads=grad_bytes(model),
        optimizer_state=optimizer_state_bytes(model, optimizer),
        activations=activation_bytes(model, batch, segments=segments, loss=loss),
        peak=step_peak_bytes(
            model, data, micro_batch_size, optimizer=optimizer, segments=segments, loss=loss
        ),
    )


def memory_sweep(
    model: nn.Module,
    data: Data,
    micro_sizes: list[int],
    *,
    optimizer: str = "adam",
    segments: int = 0,
    loss="mse",
    progress: bool = False,
) -> dict:
    """At the fixed global batch `len(data)`: saved-activation bytes (and CUDA peaks) for each
    micro-batch size, and the floor. Plain lists and ints, so it can be saved as JSON. Lesson 05."""
    from tqdm.auto import tqdm

    sizes = [positive_int("micro_sizes[i]", m) for m in micro_sizes]
    if not sizes:
        raise ValueError("micro_sizes must not be empty")
    data = data.to(device_of(model))
    acts, peaks = [], []
    for m in tqdm(sizes, desc="micro-batch sizes", disable=not progress):
        acts.append(activation_bytes(model, data.micro_batches(m)[0], segments=segments, loss=loss))
        peaks.append(
            step_peak_bytes(model, data, m, optimizer=optimizer, segments=segments, loss=loss)
        )
    return {
        "global_batch": len(data),
        "micro_sizes": sizes,
        "accumulation_steps": [math.ceil(len(data) / m) for m in sizes],
        "activations": acts,
        "peak": peaks if all(p is not None for p in peaks) else None,
        "floor": {
            "parameters": param_bytes(model),
            "gradients": grad_bytes(model),
            "optimizer state": optimizer_state_bytes(model, optimizer),
        },
        "optimizer": optimizer,
        "segments": segments,
        "device": str(device_of(model)),
    }


def proportional_deviation(sizes: list[int], values: list[float]) -> float:
    """Largest relative gap between `values` and exact proportionality to `sizes`, using the
    per-item ratio at the largest size: 0.0 means value = ratio × size exactly. Lesson 05."""
    if len(sizes) != len(values) or not sizes:
        raise ValueError(
            f"sizes and values must be non-empty and of equal length, got {len(sizes)} and {len(values)}"
        )
    i = max(range(len(sizes)), key=sizes.__getitem__)
    ratio = values[i] / sizes[i]
    return max(abs(v / (ratio * s) - 1) for s, v in zip(sizes, values, strict=True))
