"""What BatchNorm's micro-batch statistics do to training, and dropout, which matches the full batch
only in expectation. Lesson 04."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import flag, positive_int
from ..compare import flatten
from ..data import Data
from ..engine import Recipe, forward, run
from ..losses import get_loss
from ..models import NORMS, seeded
from ..reference import accumulated_grads, full_batch_grads
from .layers import _check_data, _module, check_micro_batches, norm_model


def accuracy(model: nn.Module, data: Data) -> float:
    """Fraction of `data` classified correctly, in eval mode (running statistics, no dropout)."""
    _module(model)
    _check_data(data)
    if data.y.is_floating_point() or data.y.dtype == torch.bool:
        raise ValueError(
            f"accuracy needs integer class labels in data.y, got dtype {data.y.dtype} "
            "(regression targets have no accuracy)"
        )
    model = copy.deepcopy(model).eval()
    with torch.no_grad():
        scores = forward(model, data, "data")
    get_loss("cross_entropy").check(scores, data.y)  # one score per class, labels in range
    bad = _validate.first_non_finite(scores)
    if bad is not None:  # argmax would pick the NaN: an accuracy of nothing the model learned
        raise ValueError(
            f"the model's output holds {bad[1]} at index {bad[0]} (diverged training?): no class "
            "can be read from it"
        )
    return float((scores.argmax(-1) == data.y).double().mean())


def _eval_loss(model: nn.Module, data: Data) -> float:
    """Mean cross-entropy on `data` in eval mode: the fit itself, with no micro-batch's statistics
    in the measurement (the loop's own loss normalised each micro-batch with its own)."""
    model = copy.deepcopy(model).eval()
    with torch.no_grad():
        total, count = get_loss("cross_entropy")(forward(model, data, "data"), data.y)
    return float(total) / count


def _setups(setups) -> dict:
    """{label: (norm, micro_batch_size, accumulation_steps)}, at least one."""
    setups = _validate.mapping("setups", setups)
    if not setups:
        raise ValueError(
            "setups must name at least one (norm, micro_batch_size, accumulation_steps)"
        )
    for label, setup in setups.items():
        if not isinstance(setup, (tuple, list)) or len(setup) != 3:
            raise ValueError(
                f"setups[{label!r}] must be a (norm, micro_batch_size, accumulation_steps) "
                f"triple such as ('batch', 8, 4), got {setup!r:.60}"
            )
        _validate.one_of(f"setups[{label!r}] norm", setup[0], NORMS)
        positive_int(f"setups[{label!r}] micro_batch_size", setup[1])
        positive_int(f"setups[{label!r}] accumulation_steps", setup[2])
    return setups


def _micro_steps(setups: dict, train: Data, epochs: int) -> int:
    """Micro-steps `training_comparison` runs: every setup, every epoch, every micro-batch."""
    return sum(epochs * -(-len(train) // mb) for _, mb, _ in setups.values())


def _train_test(train, test) -> None:
    _check_data(train, "train")
    _check_data(test, "test")
    if test.x.shape[1:] != train.x.shape[1:]:
        raise ValueError(
            f"test.x has shape {tuple(test.x.shape)} but train.x {tuple(train.x.shape)}: the "
            "models are built for train's features, so test must have the same"
        )


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

    _setups(setups)
    _train_test(train, test)
    flag("progress", progress)
    positive_int("epochs", epochs)
    steps = _micro_steps(setups, train, epochs)
    _validate.within_max_steps(f"micro-steps of every setup over epochs={epochs}", steps)
    out = {"labels": [], "losses": [], "accuracy": [], "train_accuracy": [], "models": []}
    out["eval_loss"] = []  # training loss in eval mode, one per setup
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
        out["eval_loss"].append(_eval_loss(trace.model, train))
        out["models"].append(trace.model)
    return out


@one_thread()
def _with_biased_running_var(model: nn.Module, b: int) -> nn.Module:
    """A copy whose BatchNorm running variances are (b − 1)/b of `model`'s: the biased variance
    of micro-batches of b that training normalised with, not the unbiased one the update stores."""
    from .layers import batchnorm_layers

    biased = copy.deepcopy(model)
    for bn in batchnorm_layers(biased):
        bn.running_var.mul_((b - 1) / b)
    return biased


def accuracy_over_seeds(
    setups: dict[str, tuple[str, int, int]],
    train: Data,
    test: Data,
    *,
    seeds=(0, 1, 2),
    epochs: int = 20,
    lr: float = 0.05,
) -> dict:
    """`training_comparison` once per seed (a different initialisation each time), and for every
    BatchNorm setup the accuracy again (a) after `recalibrate(model, train)` rebuilt its running
    statistics from the training data in one batch, and (b) with its running variance multiplied by
    (b − 1)/b, b its micro-batch size: the biased variance training normalised with, instead of the
    unbiased one PyTorch's running update stores. Lesson 04.

    Returns {"labels", "seeds", "accuracy": {label: [one per seed]}, "final_loss": {label: [mean
    training loss over the last epoch's optimizer steps, as the loop saw it (each micro-batch
    normalised with its own statistics), one per seed]}, "eval_loss": {label: [training loss of
    the trained model in eval mode, one per seed]},
    "recalibrated" and "biased_running_var": {label: [...]} (BatchNorm setups only), "runs": each
    seed's `training_comparison` result (its trained models included), "first": runs[0]}.
    """
    from .layers import batchnorm_layers
    from .recalibration import recalibrate

    seeds = [
        _validate.seed(f"seeds[{i}]", s) for i, s in enumerate(_validate.sequence("seeds", seeds))
    ]
    _setups(setups)
    _train_test(train, test)
    positive_int("epochs", epochs)
    steps = len(seeds) * _micro_steps(setups, train, epochs)
    _validate.within_max_steps(
        f"micro-steps of every setup over epochs={epochs} and {len(seeds)} seeds", steps
    )
    out = {
        "labels": list(setups),
        "seeds": seeds,
        "accuracy": {},
        "final_loss": {},
        "eval_loss": {},
        "recalibrated": {},
        "biased_running_var": {},
        "runs": [],
    }
    for seed in seeds:
        result = training_comparison(
            setups, train, test, epochs=epochs, lr=lr, seed=seed, progress=False
        )
        out["runs"].append(result)
        out.setdefault("first", result)
        for label, acc, model, losses, fit in zip(
            *(result[key] for key in ("labels", "accuracy", "models", "losses", "eval_loss")),
            strict=True,
        ):
            out["accuracy"].setdefault(label, []).append(acc)
            out["eval_loss"].setdefault(label, []).append(fit)
            _, mb, k = setups[label]
            per_epoch = -(-len(train) // (mb * k))  # optimizer steps in one epoch
            last = losses[-per_epoch:]
            out["final_loss"].setdefault(label, []).append(sum(last) / len(last))
            if batchnorm_layers(model):
                rebuilt = accuracy(recalibrate(model, train), test)
                out["recalibrated"].setdefault(label, []).append(rebuilt)
                biased = _with_biased_running_var(model, setups[label][1])
                out["biased_running_var"].setdefault(label, []).append(accuracy(biased, test))
    return out


@one_thread()
def dropout_expectation(
    model: nn.Module, data: Data, micro_batch_size: int, *, draws: int = 64, seed: int = 0
) -> dict:
    """Dropout draws different masks for micro-batches than for the full batch, so one accumulated
    gradient differs from one full-batch gradient; averaged over many draws both approach the same
    expected gradient. Lesson 04.

    Returns, after 1..draws draws, "rel_gap": |mean accumulated − mean full-batch gradient| /
    |mean full-batch gradient|, and "noise_gap": the gap pure noise would leave, σ/√d over the same
    norm, with σ² the per-draw spread of the difference estimated from all draws. "noise_ratio" is
    the last gap over the last noise gap: about 1 when the two agree in expectation; a systematic
    difference b adds to the gap and does not shrink, so the ratio grows like √(1 + d·b²/σ²).
    "slope": the least-squares slope of log(gap) against log(draws) (−1/2 for pure noise)."""
    _validate.model("model", model)
    if not any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()):
        raise ValueError(
            "model has no dropout layer with p > 0: both gradients would be the same every draw and the gap "
            "would measure only rounding (build one with al.batchnorm.norm_model(..., dropout=0.2))"
        )
    positive_int("draws", draws, minimum=2)  # one draw cannot tell its noise from a bias
    _validate.seed("seed", seed)
    check_micro_batches(model, data, micro_batch_size)
    # per draw: one accumulated window of micro-batches and one full batch
    steps = draws * (-(-len(data) // micro_batch_size) + 1)
    _validate.within_max_steps(
        f"draws × micro-batches per draw = {draws} × {steps // draws}", steps
    )
    delta_sum = full_sum = None
    delta_sq = 0.0  # Σ |δ_d|², for the spread of the per-draw differences δ_d
    gaps = []
    for d in range(draws):
        # independent masks for the two estimates, drawn without moving the caller's generator
        with seeded(seed + 2 * d):
            acc = flatten(
                accumulated_grads(
                    model, data, micro_batch_size, normalization="global", loss="cross_entropy"
                )
            )
        with seeded(seed + 2 * d + 1):
            full = flatten(full_batch_grads(model, data, loss="cross_entropy"))
        delta = acc - full
        delta_sum = delta if delta_sum is None else delta_sum + delta
        full_sum = full if full_sum is None else full_sum + full
        delta_sq += float(delta @ delta)
        gaps.append(float(delta_sum.norm() / full_sum.norm()))
    # spread of δ around its mean: Σ|δ_d − δ̄|² = Σ|δ_d|² − D·|δ̄|², over D − 1
    mean_delta = delta_sum / draws
    spread = max(delta_sq - draws * float(mean_delta @ mean_delta), 0.0) / (draws - 1)
    scale = float((full_sum / draws).norm())
    noise = [(spread / d) ** 0.5 / scale for d in range(1, draws + 1)]
    # averaging independent noise shrinks the gap as draws^(-1/2); a bias would flatten it
    logs = torch.log(torch.tensor([range(1, draws + 1), gaps], dtype=torch.float64))
    x, y = logs[0] - logs[0].mean(), logs[1] - logs[1].mean()
    slope = float((x * y).sum() / (x * x).sum())
    return {
        "draws": list(range(1, draws + 1)),
        "rel_gap": gaps,
        "noise_gap": noise,
        "noise_ratio": gaps[-1] / noise[-1],
        "slope": slope,
    }
