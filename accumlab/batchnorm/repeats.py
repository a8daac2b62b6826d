"""The training comparison repeated over data draws: each draw a fresh data set AND a fresh
initialisation, so that no statement about training rests on one lucky data set. Lesson 04."""

from __future__ import annotations

from .. import _validate
from .._threads import one_thread
from .._validate import positive_float, positive_int
from .layers import batchnorm_data
from .training import _setups, accuracy_over_seeds

# the per-draw lists accuracy_over_seeds returns, {label: [one per draw]}
_PER_DRAW = ("accuracy", "final_loss", "eval_loss", "recalibrated", "biased_running_var")


@one_thread()
def accuracy_over_draws(
    setups: dict[str, tuple[str, int, int]],
    draws=(0, 1, 2),
    *,
    train_size: int = 128,
    test_size: int = 512,
    epochs: int = 8,
    lr: float = 0.1,
) -> dict:
    """`accuracy_over_seeds` once per draw s: data `batchnorm_data(train_size + test_size,
    seed=s)` (the first train_size samples train, the rest test) and initialisation seed s.

    Returns what `accuracy_over_seeds` returns, with one entry per draw ("draws" and "seeds" both
    list the draws), and "gap_recovered": for each BatchNorm setup other than the first, the share
    of its test-accuracy gap to the first setup (as trained, not recalibrated) that recalibrating
    this setup closed, (recalibrated − plain) / (first − plain); negative where recalibration made
    it worse, None where there was no gap. Lesson 04."""
    draws = [
        _validate.seed(f"draws[{i}]", s) for i, s in enumerate(_validate.sequence("draws", draws))
    ]
    _setups(setups)
    positive_int("train_size", train_size, minimum=2)
    positive_int("test_size", test_size)
    positive_int("epochs", epochs)
    positive_float("lr", lr)
    # checked before any training: the whole sweep, not one draw, must fit MAX_STEPS
    steps = len(draws) * sum(epochs * -(-train_size // mb) for _, mb, _ in setups.values())
    _validate.within_max_steps(
        f"micro-steps of every setup over epochs={epochs} and {len(draws)} draws", steps
    )
    out: dict = {}
    for s in draws:
        blobs = batchnorm_data(train_size + test_size, seed=s)
        one = accuracy_over_seeds(
            setups, blobs[:train_size], blobs[train_size:], seeds=(s,), epochs=epochs, lr=lr
        )
        if not out:
            out = {key: one[key] for key in ("labels", "first")}
            out.update({"draws": [], "seeds": [], "runs": []})
            for key in _PER_DRAW:
                out[key] = {label: [] for label in one[key]}
        out["draws"].append(s)
        out["seeds"].append(s)
        out["runs"] += one["runs"]
        for key in _PER_DRAW:
            for label, values in one[key].items():
                out[key][label] += values
    out["gap_recovered"] = _gap_recovered(out)
    return out


def _gap_recovered(out: dict) -> dict:
    """{BatchNorm label: [share of its gap to the first BatchNorm setup, as trained, closed by
    recalibrating this one, one per draw]}."""
    labels = list(out["recalibrated"])
    if not labels:
        return {}
    first = labels[0]
    shares = {}
    for label in labels[1:]:
        shares[label] = []
        for i in range(len(out["draws"])):
            best, plain = out["accuracy"][first][i], out["accuracy"][label][i]
            rebuilt = out["recalibrated"][label][i]
            shares[label].append(None if best == plain else (rebuilt - plain) / (best - plain))
    return shares
