"""How precise is accumulation itself? Summing k gradient contributions in a low-precision buffer
against a float64 reference (lesson 06).

Each `buffer += g_i / k` rounds the running sum to the buffer's precision. bfloat16 keeps 8
significant bits, float16 11, float32 24: once g_i / k is small next to the sum, most of its bits
fall off the end, so the error grows with k. That is why trainers keep accumulation buffers (and
master weights) in float32 even when the forward and backward run in bf16/fp16.
"""

from __future__ import annotations

import torch

from .. import _validate
from .._validate import one_of, positive_int
from ..device import as_device

# one row of float64 gradients of the small MLP per micro-batch: 2**16 rows are about 160 MB
MAX_K = 2**16

# name -> (dtype of each contribution, dtype of the buffer it is added into)
ACCUMULATIONS = {
    "bfloat16": (torch.bfloat16, torch.bfloat16),
    "float16": (torch.float16, torch.float16),
    "float32": (torch.float32, torch.float32),
    "bfloat16 grads, float32 buffer": (torch.bfloat16, torch.float32),
}


def micro_batch_grads(
    k: int, *, features: int = 8, hidden: int = 32, seed: int = 0
) -> torch.Tensor:
    """Real gradients of an MLP's MSE loss, one row per micro-batch of one sample: shape (k, n).

    Computed in float64, so the only rounding the experiment sees is the accumulation's own.
    """
    from ..data import regression_data
    from ..models import mlp

    k = positive_int("k", k)
    if k > MAX_K:
        raise ValueError(f"k must be at most {MAX_K} (one gradient row each), got {k}")
    data = regression_data(n=k, features=features, seed=seed)
    model = mlp(features=features, hidden=hidden, depth=1, seed=seed)
    params = {n: p.detach() for n, p in model.named_parameters()}

    def loss_of_one(p, x, y):  # one sample = one micro-batch of size 1
        pred = torch.func.functional_call(model, p, (x.unsqueeze(0),))
        return torch.nn.functional.mse_loss(pred, y.unsqueeze(0))

    # vmap over samples: the same numbers as k separate backward passes, in one call
    grads = torch.func.vmap(torch.func.grad(loss_of_one), in_dims=(None, 0, 0))(
        params, data.x, data.y
    )
    return torch.cat([grads[n].reshape(k, -1) for n in params], dim=1)


def accumulate(contributions: torch.Tensor, accumulation: str, device: str | torch.device = "cpu"):
    """Sum rows `g_i / k` one at a time, as `.grad +=` does, in the named precision; float64 out."""
    _validate.tensor("contributions", contributions, dim=2, floating=True)
    one_of("accumulation", accumulation, ACCUMULATIONS)
    device = as_device(device)
    grad_dtype, buffer_dtype = ACCUMULATIONS[accumulation]
    k = len(contributions)
    if k == 0:  # a mean of nothing: no window to accumulate
        raise ValueError("contributions must hold at least one row (one per micro-batch), got 0")
    rows = (contributions / k).to(device=device, dtype=grad_dtype)  # each backward's own output
    buffer = torch.zeros(contributions.shape[1], dtype=buffer_dtype, device=device)
    for row in rows:
        buffer += row.to(buffer_dtype)  # rounded to the buffer's precision after every add
    return buffer.double().cpu()


def accumulation_errors(
    ks: list[int],
    accumulations: tuple[str, ...] = tuple(ACCUMULATIONS),
    *,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> dict:
    """Relative L2 error of each accumulation against float64, for every k in `ks`. Lesson 06.

    The first k rows of one set of micro-batch gradients are used for each k, so the curves differ
    only in how many contributions are summed. Returns {"ks", "errors": {name: [error per k]}}.
    """
    ks = _validate.positive_ints("ks", ks, maximum=MAX_K, why="one gradient row each")
    accumulations = _validate.sequence("accumulations", accumulations)
    for i, a in enumerate(accumulations):
        one_of(f"accumulations[{i}]", a, ACCUMULATIONS)
    device = as_device(device)
    grads = micro_batch_grads(max(ks), seed=seed)
    errors: dict[str, list[float]] = {a: [] for a in accumulations}
    for k in ks:
        exact = grads[:k].mean(dim=0)  # float64: the reference every precision is measured against
        for a in accumulations:
            approx = accumulate(grads[:k], a, device)
            errors[a].append(float((approx - exact).norm() / exact.norm()))
    return {"ks": list(ks), "errors": errors}


def grad_dtypes(low: str = "bfloat16", *, seed: int = 0) -> dict:
    """The dtype of each `.grad` after one backward, two ways (lesson 06): float32 parameters under
    `torch.autocast(low)`, and a model converted with `.to(low)` (pure 16-bit training). Also the
    dtype autocast gave the forward's output. Only the second accumulates in 16 bits."""
    from ..data import regression_data
    from ..models import mlp

    one_of("low", low, ("bfloat16", "float16"))
    dtype = getattr(torch, low)
    data = regression_data(n=8, features=4, seed=seed, dtype=torch.float32)
    autocast_model = mlp(features=4, hidden=8, depth=1, seed=seed, dtype=torch.float32)
    with torch.autocast("cpu", dtype=dtype):
        out = autocast_model(data.x)
    torch.nn.functional.mse_loss(out.float(), data.y).backward()
    low_model = mlp(features=4, hidden=8, depth=1, seed=seed, dtype=torch.float32).to(dtype)
    torch.nn.functional.mse_loss(low_model(data.x.to(dtype)).float(), data.y).backward()

    def names(model):
        return sorted({str(p.grad.dtype).removeprefix("torch.") for p in model.parameters()})

    return {
        "autocast output": str(out.dtype).removeprefix("torch."),
        "autocast, float32 parameters": names(autocast_model),
        f"model.to({low})": names(low_model),
    }
