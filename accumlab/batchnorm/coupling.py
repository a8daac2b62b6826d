"""In exact arithmetic, accumulation is exact for a forward that stays the same function across
micro-steps (spectral norm's power iteration, updated by each training forward, breaks that) and
in which no sample sees another: dropout with the same per-sample masks is exact, and so is a
recurrent network, whose coupling runs along time inside each sample. Lesson 04."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate
from .._validate import positive_int
from ..compare import GradDiff, grad_diff
from ..data import Data, regression_data
from ..models import seeded
from ..reference import accumulated_grads, full_batch_grads


class ReplayedDropout(nn.Module):
    """Dropout whose mask for sample j is fixed (drawn once from `seed` for `total` samples) and
    handed out in order: one forward of all samples and several forwards of consecutive
    micro-batches see the same per-sample masks. Lesson 04."""

    def __init__(self, p: float, total: int, seed: int = 0):
        _validate.fraction("p", p)  # p = 1 would divide the kept values by 0
        positive_int("total", total)
        _validate.seed("seed", seed)
        super().__init__()
        self.p, self.total, self.seed = p, total, seed
        self.mask: torch.Tensor | None = None
        self.cursor = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cursor + len(x) > self.total:
            raise ValueError(
                f"ReplayedDropout holds masks for total={self.total} samples and has handed out "
                f"{self.cursor}: a batch of {len(x)} runs past them (feed it consecutive batches "
                "that add up to total)"
            )
        if self.mask is None:
            _validate.fits_in_memory(
                f"ReplayedDropout masks for {self.total} samples of shape {tuple(x.shape[1:])}",
                2 * self.total * x[0].numel() * x.element_size(),
            )
            g = torch.Generator().manual_seed(self.seed)
            keep = torch.rand((self.total, *x.shape[1:]), generator=g, dtype=x.dtype) >= self.p
            self.mask = keep.to(x.dtype) / (1 - self.p)
        mask = self.mask[self.cursor : self.cursor + len(x)]
        self.cursor = (self.cursor + len(x)) % self.total
        return x * mask


def replayed_dropout_diff(
    model: nn.Module, data: Data, micro_batch_size: int, *, seed: int = 0, loss="cross_entropy"
) -> GradDiff:
    """Accumulated vs full-batch gradient when every nn.Dropout gives each sample the same mask in
    both runs. Exact when each sample's loss depends only on its own mask. Lesson 04."""
    _validate.model("model", model)
    _validate.data("data", data)
    _validate.seed("seed", seed)
    model = copy.deepcopy(model)
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Dropout):
                setattr(parent, name, ReplayedDropout(child.p, len(data), seed + replaced))
                replaced += 1
    if not replaced:
        raise ValueError("model has no nn.Dropout layer to replay")
    acc = accumulated_grads(model, data, micro_batch_size, normalization="global", loss=loss)
    return grad_diff(acc, full_batch_grads(model, data, loss=loss))


class TinyGRU(nn.Module):
    """A one-layer GRU over (batch, time, features) and a Linear head on its last hidden state."""

    def __init__(self, features: int = 3, hidden: int = 8, *, seed: int = 0, dtype=torch.float64):
        super().__init__()
        positive_int("features", features)
        positive_int("hidden", hidden)
        _validate.float_dtype("dtype", dtype)
        # the GRU's three gates: input and hidden weights and two biases each; then the head
        count = 3 * hidden * (features + hidden + 2) + hidden + 1
        _validate.fits_in_memory(
            f"TinyGRU(features={features}, hidden={hidden}) ({count:,} parameters)",
            count * dtype.itemsize,
        )
        with seeded(seed):
            self.gru = nn.GRU(features, hidden, batch_first=True).to(dtype)
            self.head = nn.Linear(hidden, 1).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(x)
        return self.head(h[-1])


def sequence_data(n: int = 32, steps: int = 12, features: int = 3, *, seed: int = 0) -> Data:
    """Random sequences (n, steps, features); the target is a noisy linear read-out of all their
    values, so the loss depends on every time step. Lesson 04."""
    positive_int("steps", steps)
    flat = regression_data(n=n, features=steps * features, seed=seed)
    x = flat.x.reshape(n, steps, features)
    return Data(x, flat.y)


def truncated_bptt_diff(model: TinyGRU, data: Data, chunks: int = 2) -> dict:
    """Where "RNNs should not accumulate" comes from: each sequence split ALONG TIME into `chunks`
    pieces, one backward per piece, the hidden state passed on from piece to piece. The loss
    predicts the target from every time step's hidden state. Carried with its graph, the pieces'
    gradients add up to one backward over the whole sequences; detached (truncated
    backpropagation through time), a piece's loss no longer reaches the earlier pieces' steps.

    Returns {"chunks", "carried": GradDiff, "detached": GradDiff}, each against the whole
    sequences' gradient. Lesson 04."""
    _validate.instance("model", model, TinyGRU, "an al.batchnorm.TinyGRU")
    _validate.data("data", data)
    if data.x.dim() != 3 or data.x.shape[2] != model.gru.input_size:
        raise ValueError(
            f"data.x must be (sequences, steps, {model.gru.input_size}) for this TinyGRU, got "
            f"{tuple(data.x.shape)} (build it with al.batchnorm.sequence_data)"
        )
    steps = data.x.shape[1]
    positive_int("chunks", chunks, minimum=2, maximum=steps, why=f"{steps} time steps to split")
    x, y = data.x.to(model.head.weight.dtype), data.y.to(model.head.weight.dtype)

    def grads(pieces: int, detach: bool) -> dict:
        net = copy.deepcopy(model)
        h = None
        for i, xs in enumerate(x.tensor_split(pieces, dim=1)):
            out, h = net.gru(xs, h)
            loss = ((net.head(out) - y.unsqueeze(1)) ** 2).sum()
            loss.backward(retain_graph=not detach and i < pieces - 1)  # later pieces reach back
            h = h.detach() if detach else h
        return {n: p.grad.clone() for n, p in net.named_parameters()}

    whole = grads(1, detach=True)
    return {
        "chunks": chunks,
        "carried": grad_diff(grads(chunks, detach=False), whole),
        "detached": grad_diff(grads(chunks, detach=True), whole),
    }
