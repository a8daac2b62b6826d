"""What occupies memory during training, part by part (lesson 05): parameters, gradients,
optimizer state and the data from tensor sizes; activations saved for backward exactly, with
saved-tensor hooks. The measured peaks are in `peaks.py`."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from .. import _validate
from .. import device as dev
from .._validate import positive_int
from ..data import Data, regression_data
from ..losses import Loss, get_loss
from ..models import mlp
from ..saved import _storage_key, saved_storages
from .checkpointing import checkpointed
from .step import device_of, memory_optimizer


def setup_bytes(width: int, depth: int, global_batch: int) -> int:
    """Rough bytes to train `memory_setup(width, depth, global_batch)` with Adam in one micro-batch:
    parameters, gradients, two moments and the step's temporaries (5 copies), the data, and about
    two saved float32 values per hidden unit and sample."""
    params = (depth + 1) * (width * width + width)
    return 4 * (5 * params + 2 * global_batch * width + 2 * (depth + 1) * global_batch * width)


def memory_setup(
    width: int = 256, depth: int = 4, global_batch: int = 256, *, seed: int = 0, device=None
):
    """The lesson's model and data: an MLP of `depth` hidden layers of `width` units (float32, as
    on a GPU) on `device`, and `global_batch` samples of regression data in host memory (each
    micro-batch is copied to the device when its forward runs). Returns (model, data). Lesson 05.

    Sizes that would need more than half of the device's memory to train are refused before
    anything is allocated (a learner's typo should not freeze the machine)."""
    for name, value in (("width", width), ("depth", depth), ("global_batch", global_batch)):
        positive_int(name, value)
    device = dev.as_device(device if device is not None else "cpu")
    need, limit = setup_bytes(width, depth, global_batch), dev.total_memory(device) // 2
    if need > limit:
        raise ValueError(
            f"width={width}, depth={depth}, global_batch={global_batch} would need about "
            f"{need / 2**30:.1f} GiB to train with Adam, more than half of the {limit * 2 / 2**30:.1f} "
            f"GiB of {dev.device_name(device)}: choose smaller sizes"
        )
    model = mlp(
        features=width, hidden=width, outputs=width, depth=depth, seed=seed, dtype=torch.float32
    )
    data = regression_data(
        n=global_batch, features=width, outputs=width, seed=seed, dtype=torch.float32
    )
    return model.to(device), data


def tensor_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors` (views of one storage count once)."""
    seen = {}
    for i, t in enumerate(_validate.sequence("tensors", tensors, allow_empty=True)):
        _validate.tensor(f"tensors[{i}]", t)
        seen[_storage_key(t)] = t.untyped_storage().nbytes()
    return sum(seen.values())


def param_bytes(model: nn.Module) -> int:
    _validate.instance("model", model, nn.Module, "a torch.nn.Module such as al.mlp()")
    return tensor_bytes(model.parameters())


def grad_bytes(model: nn.Module, batch: Data | None = None, *, loss: str | Loss = "mse") -> int:
    """Bytes of the .grad buffers: they exist from the first backward until
    zero_grad(set_to_none=True), and accumulation adds into them in place. With `batch`, measured:
    the distinct storages of every `.grad` after one backward on `batch`, on a copy of `model`;
    without, counted as one buffer per trainable parameter of its shape and dtype."""
    _validate.instance("model", model, nn.Module, "a torch.nn.Module such as al.mlp()")
    if batch is None:
        return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    _validate.data("batch", batch)
    loss_fn = get_loss(loss)
    net = copy.deepcopy(model)
    net.zero_grad(set_to_none=True)
    batch = batch.to(device_of(net))
    loss_sum, count = loss_fn(net(batch.x), batch.y)
    (loss_sum / count).backward()
    return tensor_bytes([p.grad for p in net.parameters() if p.grad is not None])


def data_bytes(data: Data) -> int:
    """Bytes a copy of `data`'s inputs and targets takes (a slice counts its own elements, not the
    storage it views). Lesson 05 counts one micro-batch's: the data stays in host memory and the
    micro-batch being computed is copied to the device."""
    _validate.data("data", data, finite=False)
    return sum(t.numel() * t.element_size() for t in (data.x, data.y))


def optimizer_state_bytes(model: nn.Module, optimizer: str = "adam") -> int:
    """Bytes of the optimizer's state on the model's device, read from a real optimizer after one
    step on a copy of `model` (state is created lazily, at the first step). Adam's per-tensor step
    counters count on a CPU; on a GPU they stay in host memory (unless capturable or fused) and
    are left out."""
    _validate.model("model", model)
    device = device_of(model)
    model = copy.deepcopy(model)
    opt = memory_optimizer(model, optimizer)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    return tensor_bytes(
        t
        for state in opt.state.values()
        for t in state.values()
        if isinstance(t, torch.Tensor) and t.device == device
    )


def activation_bytes(
    model: nn.Module, batch: Data, *, segments: int = 0, loss: str | Loss = "mse"
) -> int:
    """Bytes kept for backward by one forward pass (and the loss) on `batch`: what autograd saves,
    which with `segments` ≥ 2 includes the input each checkpointed piece keeps (see
    `checkpointing.py`). Parameters and the batch itself are not counted: they exist whether or
    not anything is saved."""
    _validate.model("model", model)
    _validate.data("batch", batch)
    loss_fn = get_loss(loss)
    batch = batch.to(device_of(model))  # the model's device, where its forward runs
    net = checkpointed(model, segments)
    exclude = [*model.parameters(), batch.x, batch.y]
    return sum(saved_storages(lambda: loss_fn(net(batch.x), batch.y), exclude).values())


def proportional_deviation(sizes: list[int], values: list[float]) -> float:
    """Largest relative gap between `values` and exact proportionality to `sizes`, using the
    per-item ratio at the largest size: 0.0 means value = ratio × size exactly. Lesson 05.

    All values 0 are proportional (0 per item); a zero ratio with any other value is not: inf."""
    sizes = _validate.positive_ints("sizes", sizes)
    values = _validate.finite_floats("values", values)
    _validate.same_length(sizes=sizes, values=values)
    i = max(range(len(sizes)), key=sizes.__getitem__)
    ratio = values[i] / sizes[i]
    if ratio == 0:
        return 0.0 if all(v == 0 for v in values) else math.inf
    return max(abs(v / (ratio * s) - 1) for s, v in zip(sizes, values, strict=True))
