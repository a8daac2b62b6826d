"""BatchNorm under micro-batching: which statistics each micro-batch sees, how the running
statistics decay, and the remedies (freeze, GroupNorm/LayerNorm, ghost batch norm). Lesson 04.

Accumulation reproduces the full batch's gradient only when each sample's loss ignores the other
samples in its micro-batch. BatchNorm in training mode does not: it normalises with the statistics
of whatever batch it is given, and it updates its running statistics once per forward.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ._threads import one_thread
from ._validate import one_of, positive_float, positive_int
from .compare import GradDiff, grad_diff
from .data import Data, classification_data
from .engine import Recipe, run
from .models import NORMS, mlp
from .reference import accumulated_grads, full_batch_grads

_NORM_TYPES = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)


def batchnorm_layers(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    """Every BatchNorm layer of `model`, in order. Lesson 04."""
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def _check_data(data) -> Data:
    if not isinstance(data, Data):
        raise ValueError(f"data must be an accumlab.Data, got {type(data).__name__}")
    return data


def check_micro_batches(model: nn.Module, data: Data, micro_batch_size: int) -> None:
    """Raise a clear ValueError when a BatchNorm layer in training mode would see a micro-batch of
    one sample (PyTorch cannot compute a variance from one value per channel). Lesson 04."""
    _check_data(data)
    positive_int("micro_batch_size", micro_batch_size)
    if micro_batch_size > len(data):
        raise ValueError(
            f"micro_batch_size must be at most the number of samples ({len(data)}), got {micro_batch_size}"
        )
    if not any(bn.training for bn in batchnorm_layers(model)):
        return
    sizes = [len(mb) for mb in data.micro_batches(micro_batch_size)]
    if 1 in sizes:
        where = (
            "every micro-batch"
            if micro_batch_size == 1
            else f"the last micro-batch of {len(data)} samples"
        )
        raise ValueError(
            f"micro_batch_size={micro_batch_size} gives {where} a single sample, but BatchNorm in "
            "training mode needs at least 2 samples per micro-batch to compute a variance; use "
            "micro_batch_size >= 2 (and a data size it leaves no single sample from), put BatchNorm "
            "in eval mode with al.freeze_batchnorm(model), or use norm='group' or 'layer'"
        )


def norm_model(
    norm: str, *, features: int = 8, hidden: int = 16, outputs: int = 3, seed: int = 0, **kwargs
):
    """The lesson's small classifier with normalisation `norm` ('batch', 'layer', 'group', 'none').

    The Linear weights depend only on `seed`, so models with different norms start alike. Lesson 04.
    """
    one_of("norm", norm, NORMS)
    return mlp(features, hidden, outputs, norm=norm, seed=seed, **kwargs)


def batchnorm_data(n: int = 64, *, seed: int = 0) -> Data:
    """Blobs shifted off zero and widely spread, so micro-batch statistics visibly differ. Lesson 04."""
    return classification_data(n=n, features=8, classes=3, spread=2.0, shift=3.0, seed=seed)


# --- 1. statistics per micro-batch ------------------------------------------------------------


def _stat_layer(model: nn.Module) -> tuple[nn.Module, bool]:
    """The module whose input BatchNorm would normalise: the first norm layer (its input), else the
    first Linear (its output, which feeds the norm slot in `al.mlp`)."""
    for m in model.modules():
        if isinstance(m, _NORM_TYPES):
            return m, True
    for m in model.modules():
        if isinstance(m, nn.Linear):
            return m, False
    raise ValueError(
        "model has neither a normalisation layer nor a Linear layer to take statistics at"
    )


def norm_inputs(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Features entering the first normalisation layer for inputs `x` (no running stats touched)."""
    model = copy.deepcopy(model)  # a forward in training mode would update the caller's buffers
    layer, is_norm = _stat_layer(model)
    seen = []
    if is_norm:
        handle = layer.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach()))
    else:
        handle = layer.register_forward_hook(lambda _m, _args, out: seen.append(out.detach()))
    try:
        with torch.no_grad():
            model(x)
    finally:
        handle.remove()
    return seen[0]


@one_thread()
def micro_batch_stats(model: nn.Module, data: Data, micro_batch_size: int) -> dict:
    """Per-channel mean and variance BatchNorm normalises with in each micro-batch, and those of the
    full batch, at the first normalisation layer. Variances are the biased ones BatchNorm uses.

    Returns {"micro_means", "micro_vars": (micro-batches, channels), "full_mean", "full_var",
    "between_var" (variance of the micro-batch means), "sizes"}. Lesson 04.
    """
    check_micro_batches(model, data, micro_batch_size)
    feats = norm_inputs(model, data.x)
    chunks = feats.split(micro_batch_size)
    means = torch.stack([c.mean(0) for c in chunks])
    vars_ = torch.stack([c.var(0, unbiased=False) for c in chunks])
    sizes = torch.tensor([len(c) for c in chunks], dtype=feats.dtype)
    w = sizes / sizes.sum()
    full_mean = feats.mean(0)
    return {
        "micro_means": means,
        "micro_vars": vars_,
        "full_mean": full_mean,
        "full_var": feats.var(0, unbiased=False),
        # law of total variance: full var = weighted mean of micro vars + this spread of the means
        "between_var": (w[:, None] * (means - full_mean) ** 2).sum(0),
        "sizes": [len(c) for c in chunks],
        "micro_batch_size": micro_batch_size,
    }


# --- 2. gradient mismatch -----------------------------------------------------------------------


@one_thread()
def batch_gradient_diff(
    model: nn.Module, data: Data, micro_batch_size: int, *, loss="cross_entropy"
) -> GradDiff:
    """Accumulated (one window over all of `data`) vs full-batch gradient. Lesson 04.

    Uses the "global" normalisation, exact for unequal micro-batches, so any mismatch left comes
    from the model itself (BatchNorm, dropout), not from how the loss was divided.
    """
    check_micro_batches(model, data, micro_batch_size)
    acc = accumulated_grads(model, data, micro_batch_size, normalization="global", loss=loss)
    return grad_diff(acc, full_batch_grads(model, data, loss=loss))


def gradient_mismatch(
    model: nn.Module, data: Data, micro_batch_sizes, *, loss="cross_entropy"
) -> dict:
    """`batch_gradient_diff` for each micro-batch size: {"micro_batch_sizes", "max_rel", "diffs"}.
    Lesson 04."""
    sizes = list(micro_batch_sizes)
    if not sizes:
        raise ValueError("micro_batch_sizes must not be empty")
    diffs = [batch_gradient_diff(model, data, mb, loss=loss) for mb in sizes]
    return {"micro_batch_sizes": sizes, "max_rel": [d.max_rel for d in diffs], "diffs": diffs}


# --- 3. running statistics ----------------------------------------------------------------------


def with_momentum(model: nn.Module, momentum: float) -> nn.Module:
    """A copy of `model` whose BatchNorm layers use `momentum` (PyTorch's: weight of the NEW batch)."""
    positive_float("momentum", momentum)
    if momentum > 1:
        raise ValueError(f"momentum must be in (0, 1], got {momentum!r}")
    model = copy.deepcopy(model)
    for bn in batchnorm_layers(model):
        bn.momentum = momentum
    return model


def matching_momentum(momentum: float, accumulation_steps: int) -> float:
    """The momentum m' with (1 − m')^k = 1 − m: k micro-batch updates then decay the old running
    statistics exactly as one full-batch update with `momentum` does. Lesson 04."""
    positive_float("momentum", momentum)
    if momentum >= 1:
        raise ValueError(f"momentum must be in (0, 1), got {momentum!r}")
    positive_int("accumulation_steps", accumulation_steps)
    return 1.0 - (1.0 - momentum) ** (1.0 / accumulation_steps)


def micro_batch_weights(momentum: float, accumulation_steps: int) -> list[float]:
    """Weight each micro-batch's mean gets in the running mean after one window of k updates: the
    last one m, the first m·(1 − m)^(k−1). A full-batch step gives every sample the same weight."""
    positive_float("momentum", momentum)
    k = positive_int("accumulation_steps", accumulation_steps)
    return [momentum * (1 - momentum) ** (k - 1 - i) for i in range(k)]


def _running_after_step(model, data, micro_batch_size, accumulation_steps, fill: float):
    """First BatchNorm's (running_mean, running_var) after ONE optimizer step's forwards, starting
    from running statistics all equal to `fill`."""
    model = copy.deepcopy(model)
    for bn in batchnorm_layers(model):
        bn.running_mean.fill_(fill)
        bn.running_var.fill_(fill)
    recipe = Recipe(micro_batch_size, accumulation_steps)
    window = data[: recipe.window_size]
    # optimizer=None: forwards and backwards only; the running statistics change in the forwards
    trace = run(recipe, model, window, loss="cross_entropy", optimizer=None, record_grads=False)
    bn = batchnorm_layers(trace.model)[0]
    return bn.running_mean.clone(), bn.running_var.clone()


@one_thread()
def running_stats_step(
    model: nn.Module, data: Data, micro_batch_size: int, accumulation_steps: int
) -> dict:
    """The first BatchNorm's running statistics after one accumulated step (k micro-batch forwards)
    and after one full-batch step over the same samples, both from the model's own buffers.

    `old_weight_*` is how much of the previous running mean survives the step, measured by starting
    once from 0 and once from 1: the running mean is linear in its old value. Lesson 04.
    """
    _check_data(data)
    positive_int("accumulation_steps", accumulation_steps)
    bns = batchnorm_layers(model)
    if not bns:
        raise ValueError("model has no BatchNorm layer: it keeps no running statistics")
    window = len(data.first_window(micro_batch_size, accumulation_steps))
    check_micro_batches(model, data[:window], micro_batch_size)
    out = {"momentum": bns[0].momentum, "accumulation_steps": accumulation_steps}
    for name, (mb, k) in {
        "accumulated": (micro_batch_size, accumulation_steps),
        "full": (window, 1),
    }.items():
        mean0, var0 = _running_after_step(model, data, mb, k, 0.0)
        mean1, _ = _running_after_step(model, data, mb, k, 1.0)
        out[f"old_weight_{name}"] = mean1 - mean0  # one value per channel, all equal
        out[f"running_mean_{name}"] = mean0  # what the step added on top of the old value × weight
        out[f"running_var_{name}"] = var0
    return out


@one_thread()
def running_mean_trajectory(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    steps: int = 4,
    channel: int = 0,
) -> dict:
    """One channel's running mean after every forward, over `steps` optimizer steps, accumulating
    (k forwards per step) and full-batch (1 forward per step). Weights stay fixed: this isolates the
    statistics. Lesson 04's widget."""
    positive_int("steps", steps)
    bns = batchnorm_layers(model)
    if not bns:
        raise ValueError("model has no BatchNorm layer: it keeps no running statistics")
    window = len(data.first_window(micro_batch_size, accumulation_steps))
    check_micro_batches(model, data[:window], micro_batch_size)
    if not 0 <= channel < bns[0].num_features:
        raise ValueError(f"channel must be in [0, {bns[0].num_features}), got {channel!r}")
    windows = [data[i : i + window] for i in range(0, len(data) - window + 1, window)]
    out = {"steps": steps, "accumulation_steps": accumulation_steps, "channel": channel}
    for name, mb in (("accumulated", micro_batch_size), ("full", window)):
        m = copy.deepcopy(model).train()
        first = batchnorm_layers(m)[0]
        xs, ys = [0.0], [float(first.running_mean[channel])]
        with torch.no_grad():
            for s in range(steps):
                chunks = windows[s % len(windows)].x.split(mb)
                for j, x in enumerate(chunks):
                    m(x)
                    xs.append(s + (j + 1) / len(chunks))
                    ys.append(float(first.running_mean[channel]))
        out[name] = (xs, ys)
    out["target"] = float(norm_inputs(model, data[: len(windows) * window].x)[:, channel].mean())
    return out


# --- 5. remedies ----------------------------------------------------------------------------------


def freeze_batchnorm(model: nn.Module) -> nn.Module:
    """A copy of `model` whose BatchNorm layers are in eval mode: they normalise with their running
    statistics and no longer update them, so each sample's output ignores its micro-batch (the
    usual setting when fine-tuning). Other layers keep their mode. Lesson 04."""
    model = copy.deepcopy(model)
    for bn in batchnorm_layers(model):
        bn.eval()
    return model


class GhostBatchNorm1d(nn.BatchNorm1d):
    """BatchNorm1d that, in training mode, normalises each consecutive chunk of `ghost_batch_size`
    samples with that chunk's own statistics and updates the running statistics once per chunk —
    exactly what accumulating micro-batches of that size does to a plain BatchNorm (Hoffer et al.,
    2017). In eval mode it is a plain BatchNorm1d. Lesson 04."""

    def __init__(self, num_features: int, ghost_batch_size: int, **kwargs):
        super().__init__(num_features, **kwargs)
        self.ghost_batch_size = positive_int("ghost_batch_size", ghost_batch_size, minimum=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return super().forward(x)
        chunks = x.split(self.ghost_batch_size)
        if len(chunks[-1]) < 2:
            raise ValueError(
                f"ghost_batch_size={self.ghost_batch_size} leaves a last chunk of 1 sample out of "
                f"{len(x)}: BatchNorm needs at least 2 samples to compute a variance"
            )
        return torch.cat([super(GhostBatchNorm1d, self).forward(c) for c in chunks])

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, ghost_batch_size={self.ghost_batch_size}"


def ghost_batchnorm(model: nn.Module, ghost_batch_size: int) -> nn.Module:
    """A copy of `model` with every BatchNorm1d replaced by a GhostBatchNorm1d carrying the same
    weights, running statistics and momentum. Lesson 04."""
    positive_int("ghost_batch_size", ghost_batch_size, minimum=2)
    model = copy.deepcopy(model)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.BatchNorm1d:
                ghost = GhostBatchNorm1d(
                    child.num_features,
                    ghost_batch_size,
                    eps=child.eps,
                    momentum=child.momentum,
                    affine=child.affine,
                    track_running_stats=child.track_running_stats,
                ).to(dtype=next(iter(child.state_dict().values())).dtype)
                ghost.load_state_dict(child.state_dict())
                ghost.train(child.training)
                setattr(parent, name, ghost)
    return model


def sync_batchnorm_sweep(
    model: nn.Module, data: Data, micro_batch_size: int, ranks=(1, 2, 4)
) -> dict:
    """What SyncBatchNorm changes under accumulation, computed on one process.

    With R ranks each holding `micro_batch_size` samples, SyncBatchNorm all-reduces the statistics
    inside each forward, so every statistic covers R × micro_batch_size samples; DDP then averages
    the gradients. That equals one process normalising R × micro_batch_size samples at once, i.e.
    accumulation with micro-batches of that size. The global batch is all of `data`, so each R uses
    k = len(data) / (R × micro_batch_size) micro-steps. Lesson 04.
    """
    _check_data(data)
    positive_int("micro_batch_size", micro_batch_size)
    out = {"ranks": [], "statistics_size": [], "accumulation_steps": [], "max_rel": []}
    for r in ranks:
        positive_int("ranks", r)
        group = r * micro_batch_size
        if len(data) % group:
            raise ValueError(
                f"ranks × micro_batch_size = {group} must divide the {len(data)} samples of the global batch"
            )
        out["ranks"].append(r)
        out["statistics_size"].append(group)
        out["accumulation_steps"].append(len(data) // group)
        out["max_rel"].append(batch_gradient_diff(model, data, group).max_rel)
    return out


# --- 4. effect on training ------------------------------------------------------------------------


def accuracy(model: nn.Module, data: Data) -> float:
    """Fraction of `data` classified correctly, in eval mode (running statistics, no dropout)."""
    model = copy.deepcopy(model).eval()
    with torch.no_grad():
        return float((model(data.x).argmax(-1) == data.y).double().mean())


@one_thread()
def training_comparison(
    setups: dict[str, tuple[str, int, int]],
    train: Data,
    test: Data,
    *,
    epochs: int = 20,
    lr: float = 0.05,
    seed: int = 0,
    progress: bool = True,
) -> dict:
    """Train one model per setup {label: (norm, micro_batch_size, accumulation_steps)} from the
    same seed with SGD; return per-step losses and final test accuracy (eval mode). Lesson 04."""
    from tqdm.auto import tqdm

    if not setups:
        raise ValueError(
            "setups must name at least one (norm, micro_batch_size, accumulation_steps)"
        )
    _check_data(train)
    _check_data(test)
    out = {"labels": [], "losses": [], "accuracy": [], "train_accuracy": [], "models": []}
    for label, (norm, mb, k) in tqdm(setups.items(), desc="training", disable=not progress):
        model = norm_model(
            norm, features=train.x.shape[1], outputs=int(train.y.max()) + 1, seed=seed
        )
        check_micro_batches(model, train, mb)
        trace = run(
            Recipe(mb, k),
            model,
            train,
            loss="cross_entropy",
            optimizer="sgd",
            lr=lr,
            epochs=epochs,
            record_grads=False,
        )
        out["labels"].append(label)
        out["losses"].append(trace.window_losses)
        out["accuracy"].append(accuracy(trace.model, test))
        out["train_accuracy"].append(accuracy(trace.model, train))
        out["models"].append(trace.model)
    return out


# --- 6. dropout -----------------------------------------------------------------------------------


@one_thread()
def dropout_expectation(
    model: nn.Module, data: Data, micro_batch_size: int, *, draws: int = 64, seed: int = 0
) -> dict:
    """Dropout draws different masks for micro-batches than for the full batch, so one accumulated
    gradient differs from one full-batch gradient; averaged over many draws both approach the same
    expected gradient. Returns the relative L2 gap of the running averages after 1..draws draws.
    Lesson 04."""
    positive_int("draws", draws)
    check_micro_batches(model, data, micro_batch_size)
    names = sorted(n for n, _ in model.named_parameters())

    def flat(g):
        return torch.cat([g[n].reshape(-1) for n in names])

    acc_sum = full_sum = None
    gaps = []
    for d in range(draws):
        torch.manual_seed(seed + 2 * d)  # independent masks for the two estimates
        acc = flat(
            accumulated_grads(
                model, data, micro_batch_size, normalization="global", loss="cross_entropy"
            )
        )
        torch.manual_seed(seed + 2 * d + 1)
        full = flat(full_batch_grads(model, data, loss="cross_entropy"))
        acc_sum = acc if acc_sum is None else acc_sum + acc
        full_sum = full if full_sum is None else full_sum + full
        gaps.append(float((acc_sum - full_sum).norm() / full_sum.norm()))
    return {"draws": list(range(1, draws + 1)), "rel_gap": gaps}


# --- 7. the explorer's computation ---------------------------------------------------------------


@one_thread()
def explore_batchnorm(
    norm: str,
    micro_batch_size: int,
    accumulation_steps: int,
    momentum: float,
    *,
    data: Data | None = None,
) -> dict:
    """Everything lesson 04's widget draws for one setting: per-micro-batch statistics, the gradient
    error of accumulating vs the full batch, and (BatchNorm only) the running-mean trajectory."""
    one_of("norm", norm, NORMS)
    data = data if data is not None else batchnorm_data()
    window = len(data.first_window(micro_batch_size, accumulation_steps))
    model = with_momentum(norm_model(norm), momentum) if norm == "batch" else norm_model(norm)
    batch = data[:window]
    return {
        "norm": norm,
        "momentum": momentum,
        "stats": micro_batch_stats(model, batch, micro_batch_size),
        "diff": batch_gradient_diff(model, batch, micro_batch_size),
        "trajectory": (
            running_mean_trajectory(model, data, micro_batch_size, accumulation_steps)
            if norm == "batch"
            else None
        ),
    }


def old_weight_formula(momentum: float, updates: int) -> float:
    """(1 − momentum)^updates: what survives of the old running statistics. Lesson 04."""
    return (1.0 - momentum) ** updates


__all__ = [
    "GhostBatchNorm1d",
    "accuracy",
    "batch_gradient_diff",
    "batchnorm_layers",
    "check_micro_batches",
    "dropout_expectation",
    "explore_batchnorm",
    "freeze_batchnorm",
    "ghost_batchnorm",
    "gradient_mismatch",
    "batchnorm_data",
    "matching_momentum",
    "micro_batch_stats",
    "micro_batch_weights",
    "norm_inputs",
    "norm_model",
    "old_weight_formula",
    "running_mean_trajectory",
    "running_stats_step",
    "sync_batchnorm_sweep",
    "training_comparison",
    "with_momentum",
]
