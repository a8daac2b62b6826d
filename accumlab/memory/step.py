"""One optimizer step over a window of micro-batches, written the way a training script would
(lesson 05). Memory and timing measurements run this lean loop rather than `al.run`, which also
records a Trace; benchmarks/engine_overhead.py compares the two."""

from __future__ import annotations

import torch
from torch import nn

from .. import _validate
from ..data import Data
from ..losses import Loss, get_loss
from ..optim import make_optimizer


def device_of(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def memory_optimizer(
    model: nn.Module,
    optimizer: str = "adam",
    *,
    foreach: bool | None = True,
    fused: bool = False,
    lr: float = 1e-3,
) -> torch.optim.Optimizer:
    """The named optimizer for `model`, with its multi-tensor ("foreach") implementation on or off,
    or (`fused=True`) its fused kernel, which updates every element in one pass.

    foreach=True is what torch.optim picks by itself for CUDA parameters; on CPU parameters it picks
    the per-parameter loop (`_default_to_fused_or_foreach` in torch/optim/optimizer.py). The lesson
    forces True by default so a CPU measures the temporaries a GPU's step allocates; None leaves
    torch to choose."""
    from .._validate import one_of
    from ..optim import OPTIMIZERS

    _validate.model("model", model)
    # a name only: None (gradients without an update) would leave nothing to measure here
    one_of("optimizer", optimizer, OPTIMIZERS)
    if foreach is not None:
        _validate.flag("foreach", foreach)
    _validate.flag("fused", fused)
    opt = make_optimizer(optimizer, model.parameters(), lr)
    for group in opt.param_groups:
        # both read at every step(), and fused before the first one creates the state: setting
        # them here is enough (fused excludes foreach)
        group["foreach"] = False if fused else foreach
        group["fused"] = fused
    return opt


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    micro_batches: list[Data],
    loss: str | Loss = "mse",
    *,
    hold_last_batch: bool = False,
    compact_loss: bool = False,
) -> torch.Tensor:
    """zero → (copy the micro-batch to the device, forward, loss / k, backward) per micro-batch →
    step. The data stays in host memory, as a data loader keeps it: only the micro-batch being
    computed is on the device. Before `step()` the loop deletes its last micro-batch; with
    `hold_last_batch=True` it keeps it bound, as a plain `for x, y in loader` loop does, so one
    micro-batch's data is alive during the step (lesson 05 measures the difference).
    `F.mse_loss` returns a 0-d loss whose storage keeps one float per output element (its meta
    function shrinks a full-size output's shape, not its storage); `compact_loss=True` copies the loss into a storage of its
    own before backward, so that buffer is freed at once (lesson 05 measures it apart). Returns the
    window's summed loss as a detached tensor: no `.item()` inside the loop, so a GPU never waits
    for the CPU here."""
    _validate.model("model", model)
    _validate.optimizer("optimizer", optimizer)
    for i, mb in enumerate(_validate.sequence("micro_batches", micro_batches)):
        _validate.data(f"micro_batches[{i}]", mb, finite=False)
    hold_last_batch = _validate.flag("hold_last_batch", hold_last_batch)
    compact_loss = _validate.flag("compact_loss", compact_loss)
    loss_fn = get_loss(loss)
    k = len(micro_batches)
    device = device_of(model)
    optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), device=device)
    for mb in micro_batches:
        # a copy even on the CPU, so that the CPU allocates what a GPU loop's host-to-device copy
        # does; it is freed when this micro-batch's backward has used it
        x, y = mb.x.to(device, copy=True), mb.y.to(device, copy=True)
        loss_sum, count = loss_fn(model(x), y)
        if compact_loss:  # a 4-byte copy: rebinding the name frees the output-sized storage
            loss_sum = loss_sum.clone()
        (loss_sum / count / k).backward()  # loss / k: the window's gradient is the mean of k means
        total += loss_sum.detach()  # detached: the running total must not keep each graph alive
    if not hold_last_batch:
        # the loop's names still hold the last micro-batch's device copy: without this `del` it
        # is alive during step(), on top of the floor
        del x, y, loss_sum, count
    optimizer.step()
    return total
