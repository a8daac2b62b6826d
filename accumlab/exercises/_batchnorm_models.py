"""Exercise 04.3's model: every kind of BatchNorm layer a freeze must find, with dropout, an
InstanceNorm that tracks running statistics (a norm layer that must stay in training mode), and
running statistics, scales and shifts that are not the initial ones; and the remark on the layers
an answer left in training mode."""

from __future__ import annotations

import torch
from torch import nn

from ._answers import Hint

BATCHNORM = nn.modules.batchnorm._BatchNorm  # BatchNorm1d/2d/3d, SyncBatchNorm, LazyBatchNorm*
# normalises each sample on its own (exact under accumulation) but, tracking running statistics,
# computes something else in eval mode: a freeze that switches every norm layer changes it
INSTANCE = nn.InstanceNorm1d


class _MixedNorms(nn.Module):
    """04.3's model: every BatchNorm kind a freeze must find — BatchNorm1d, BatchNorm2d and
    BatchNorm3d (over 2 × 2 × 2 and 2 × 2 × 2 × 1 views of the features; a tuple of the three
    classes people name first misses the 3d one) and SyncBatchNorm (plain BatchNorm without a
    process group) —
    with dropout after the first and the last, and an InstanceNorm1d with running statistics (over
    a 2 × 4 view) that must keep its training mode."""

    def __init__(self, dropout: float | None):
        super().__init__()
        drop = (lambda: nn.Dropout(dropout)) if dropout else nn.Identity
        self.inner = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Tanh(), drop())
        self.image = nn.BatchNorm2d(2)
        self.volume = nn.BatchNorm3d(2)
        self.instance = INSTANCE(2, track_running_stats=True)
        self.outer = nn.Sequential(
            nn.Linear(8, 8), nn.SyncBatchNorm(8), nn.Tanh(), drop(), nn.Linear(8, 3)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inner(x)
        h = self.image(h.reshape(len(h), 2, 2, 2)).reshape(len(h), 8)
        h = self.volume(h.reshape(len(h), 2, 2, 2, 1)).reshape(len(h), 8)
        h = self.instance(h.reshape(len(h), 2, 4)).reshape(len(h), 8)
        return self.outer(h)


def model_with_statistics(dropout: float | None) -> nn.Module:
    """04.3's model with running statistics, scales and shifts that are not the initial 0, 1, 1,
    0: BatchNorm in eval mode is then visibly different from an identity."""
    from ..models import seeded

    with seeded(0):
        model = _MixedNorms(dropout).double()
    g = torch.Generator().manual_seed(40)
    with torch.no_grad():
        for bn in (m for m in model.modules() if isinstance(m, BATCHNORM)):
            shape = bn.running_mean.shape
            bn.running_mean.copy_(torch.randn(shape, generator=g, dtype=torch.float64))
            bn.running_var.copy_(0.5 + torch.rand(shape, generator=g, dtype=torch.float64))
            bn.weight.copy_(0.5 + torch.rand(shape, generator=g, dtype=torch.float64))
            bn.bias.copy_(torch.randn(shape, generator=g, dtype=torch.float64))
        # running statistics far from each sample's own: eval mode visibly differs
        model.instance.running_mean.copy_(torch.tensor([1.5, -1.0], dtype=torch.float64))
        model.instance.running_var.copy_(torch.tensor([3.0, 0.4], dtype=torch.float64))
    return model


def why_still_training(frozen: nn.Module) -> str:
    """04.3's remark after the layers left in training mode, fitted to what the answer did."""
    norms = [m for m in frozen.modules() if isinstance(m, BATCHNORM)]
    one_d = [m for m in norms if type(m) is nn.BatchNorm1d]
    # BatchNorm1d frozen, others not: the answer tested for it (and maybe for more kinds)
    if one_d and not any(m.training for m in one_d):
        left = sorted({type(m).__name__ for m in norms if m.training})
        tested = sorted({type(m).__name__ for m in norms if not m.training})

        def listed(names, word):
            return f" {word} ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)

        return (
            f"{listed(left, 'and')} {'is not a subclass' if len(left) == 1 else 'are not subclasses'}"
            f" of {listed(tested, 'or')}: all of them derive from nn.modules.batchnorm._BatchNorm"
        )
    return "a layer's mode, set by .eval() or .train(False), decides which statistics it uses"


def batchnorm_buffers_changed(model: nn.Module, before: dict) -> bool:
    """Whether any BatchNorm buffer of `model` differs from `before` (name → tensor). InstanceNorm
    in training mode updates its own running statistics: only BatchNorm's count."""
    kept = {n for n, m in model.named_modules() if isinstance(m, BATCHNORM)}
    return any(
        not torch.equal(before[n], b)
        for n, b in model.named_buffers()
        if n.rsplit(".", 1)[0] in kept and n in before
    )


def statistics_or_weights_touched(frozen: nn.Module, before: dict) -> str | None:
    """04.3's remark on what the answer itself did to the model before any forward: reset or
    overwrote BatchNorm's running statistics, or stopped the gradients of layers BatchNorm is not
    (freezing BatchNorm's own γ and β is the answer's choice; it leaves accumulation exact)."""
    kept = {n for n, m in frozen.named_modules() if isinstance(m, BATCHNORM)}
    if batchnorm_buffers_changed(frozen, before):
        return (
            "your answer reset or overwrote the running statistics before any forward; freezing "
            "keeps them and only switches the layers to eval mode"
        )
    stopped = [n for n, p in frozen.named_parameters() if not p.requires_grad]
    stopped = [n for n in stopped if n.rsplit(".", 1)[0] not in kept]
    if stopped:
        return (
            f"your answer set requires_grad=False on {', '.join(stopped)}: freezing BatchNorm "
            "means its statistics (eval mode), not the weights; those layers must keep training"
        )
    return None


DROPPED = (0.1, 0.3)


def dropped(model: nn.Module, dropouts: dict) -> dict:
    """One forward of `model` (grad on, as in training); for each original dropout layer, the
    share of its nonzero inputs it zeroed and whether it scaled the rest by 1/(1 − p). Read by
    forward hooks on the layers themselves, around whatever the answer did to their forward."""
    seen: dict = {}

    def record(name):
        def hook(module, args, out):
            x = args[0].detach()
            nonzero = x != 0
            kept = nonzero & (out.detach() != 0)
            p = module.p
            seen[name] = (
                float((nonzero & ~kept).sum()) / max(int(nonzero.sum()), 1),
                bool(torch.allclose(out.detach()[kept], x[kept] / (1 - p), rtol=1e-9, atol=0)),
            )

        return hook

    handles = [m.register_forward_hook(record(n)) for n, m in dropouts.items()]
    try:
        with torch.random.fork_rng():
            torch.manual_seed(43)
            model(torch.randn(256, 8, dtype=torch.float64))
    finally:
        for h in handles:
            h.remove()
    missing = set(dropouts) - set(seen)
    if missing:
        raise Hint(
            f"the dropout layers {sorted(missing)} were not called in a forward of the model: "
            "keep every layer where it is"
        )
    return seen
