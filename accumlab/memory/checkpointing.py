"""Gradient checkpointing around a Sequential model (lesson 05). Built on `torch.utils.checkpoint`
(non-reentrant, the variant PyTorch recommends).

What a checkpoint keeps is counted by the same saved-tensor hooks as everything else: the
non-reentrant checkpoint saves each piece's input (`_CheckpointFrame.save_inputs` in
torch/utils/checkpoint.py) BEFORE it enters its own `_checkpoint_hook`, so an outer
`saved_tensors_hooks` (`al.memory.activation_bytes`) packs that input like any saved tensor, and
sees nothing of the piece's inside, which is recomputed during backward."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .. import _validate
from .._validate import positive_int


def _layers(modules: list[nn.Module]) -> list[list[nn.Module]]:
    """Group modules into layers, each starting at a Linear (Linear → norm → activation ...), so
    cuts fall between layers and a checkpoint holds a layer's input, not a half-computed value."""
    layers: list[list[nn.Module]] = []
    for m in modules:
        if isinstance(m, nn.Linear) or not layers:
            layers.append([])
        layers[-1].append(m)
    return layers


def _split(modules: list[nn.Module], segments: int) -> list[nn.Sequential]:
    layers = _layers(modules)
    if segments > len(layers):
        raise ValueError(
            f"segments must be at most the {len(layers)} layers of the model, got {segments}"
        )
    bounds = [round(i * len(layers) / segments) for i in range(segments + 1)]
    return [
        nn.Sequential(*[m for layer in layers[a:b] for m in layer])
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]


class Checkpointed(nn.Module):
    """`model` (an nn.Sequential) cut into `segments` pieces; every piece but the last is run under
    `torch.utils.checkpoint`, which keeps only the piece's input and recomputes its inside during
    backward. The last piece runs normally, as in `torch.utils.checkpoint.checkpoint_sequential`:
    its activations are needed at once by backward. Shares parameters with `model`. Lesson 05.
    """

    def __init__(self, model: nn.Sequential, segments: int = 2):
        super().__init__()
        if not isinstance(model, nn.Sequential):
            raise ValueError(f"model must be an nn.Sequential, got {type(model).__name__}")
        segments = positive_int("segments", segments, minimum=2)
        self.pieces = nn.ModuleList(_split(list(model.children()), segments))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for piece in self.pieces[:-1]:
            if torch.is_grad_enabled():
                x = checkpoint(piece, x, use_reentrant=False)
            else:
                x = piece(x)
        return self.pieces[-1](x)


def checkpointed(model: nn.Module, segments: int) -> nn.Module:
    """`model` itself when `segments` is 0 (no checkpointing), else `Checkpointed(model, segments)`."""
    _validate.instance("model", model, nn.Module, "a torch.nn.Module such as al.mlp()")
    if positive_int("segments", segments, minimum=0) == 1:
        raise ValueError(
            "segments must be 0 (no checkpointing) or at least 2 (one piece is the whole model, "
            "kept as it is), got 1"
        )
    if segments == 0:
        return model
    return Checkpointed(model, segments)


def checkpoint_grad_gap(model: nn.Module, data, segments: int, *, loss="mse") -> float:
    """Largest |difference| between the gradients with and without checkpointing on `data`
    (recomputation repeats the same operations, so it should be 0). Lesson 05."""
    import copy

    from ..losses import get_loss

    _validate.model("model", model)
    _validate.data("data", data)
    checkpointed(model, segments)  # checks segments before any work
    loss_fn = get_loss(loss)
    grads = []
    for seg in (0, segments):
        m = copy.deepcopy(model)
        loss_sum, count = loss_fn(checkpointed(m, seg)(data.x), data.y)
        (loss_sum / count).backward()
        grads.append([p.grad for p in m.parameters()])
    return max(float((a - b).abs().max()) for a, b in zip(*grads, strict=True))
