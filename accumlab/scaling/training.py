"""Does the token-normalisation bug matter for training? One tiny language model trained three
ways from the same start on the same windows: one full batch per step, accumulation with the
window's global token count, and accumulation with the mean of micro-batch means (lesson 03).
Also the data the lesson's DataLoader serves: sequences of different lengths, unpadded.
"""

from __future__ import annotations

import torch
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import MAX_STEPS, positive_int
from ..data import IGNORE_INDEX, Data
from ..engine import Recipe, run
from .division import with_params
from .weights import mean_loss

# the three ways, and how each splits a window of micro_batch_size × k sequences
TRAINING_WAYS = ("full batch", "global count", "mean of means")


@one_thread()  # tiny ops: a second torch thread costs more than it computes
def token_training(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    accumulation_steps: int,
    *,
    epochs: int = 12,
    optimizer: str = "adam",
    lr: float = 0.05,
) -> dict:
    """Train copies of `model` (a token model, e.g. al.TinyLM) on `data` for `epochs` epochs, one
    optimizer step per window of micro_batch_size × accumulation_steps sequences, each of the
    TRAINING_WAYS. Lesson 03.

    Returns {"epoch": [0, 1, ..., epochs], way: [token-mean loss over ALL of `data` before
    training and after each epoch]} — the loss every way is judged by, whatever it optimises.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    mb = positive_int("micro_batch_size", micro_batch_size)
    k = positive_int("accumulation_steps", accumulation_steps)
    epochs = positive_int("epochs", epochs, maximum=MAX_STEPS, why="one loss evaluation per epoch")
    recipes = {
        "full batch": Recipe(mb * k, 1),  # the same windows, each in one micro-batch
        "global count": Recipe(mb, k, "global"),
        "mean of means": Recipe(mb, k, "mean"),
    }
    steps = len(recipes["full batch"].windows(data))  # optimizer steps per epoch
    _validate.within_max_steps(
        f"epochs × micro-batches = {epochs} × {len(data.micro_batches(mb))}",
        epochs * len(data.micro_batches(mb)),
    )
    start = mean_loss(model, data, loss="cross_entropy")
    out: dict[str, list] = {"epoch": list(range(epochs + 1))}
    for way, recipe in recipes.items():
        trace = run(
            recipe, model, data, loss="cross_entropy", optimizer=optimizer, lr=lr, epochs=epochs
        )
        after = trace.params[steps - 1 :: steps]  # the parameters at the end of each epoch
        out[way] = [start] + [
            mean_loss(with_params(model, p), data, loss="cross_entropy") for p in after
        ]
    return out


def unpadded(data: Data) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each sequence of token data as (tokens, labels) without its padding: what a Dataset of
    variable-length text yields before a collate function pads a micro-batch. Lesson 03."""
    _validate.data("data", data)
    if data.x.dim() != 2 or data.x.shape != data.y.shape or data.y.is_floating_point():
        raise ValueError(
            "data must be token data (al.token_data): x and y of the same shape (sequences, "
            f"width) with integer labels, got x {tuple(data.x.shape)}, y {tuple(data.y.shape)} "
            f"{str(data.y.dtype).removeprefix('torch.')}"
        )
    lengths = data.lengths().tolist()
    for i, n in enumerate(lengths):
        if bool((data.y[i, n:] != IGNORE_INDEX).any()):  # a label after padding: not a prefix
            raise ValueError(
                f"data row {i} has padding (label {IGNORE_INDEX}) before its last real label: "
                "unpadded expects right-padded sequences, as al.token_data makes"
            )
    return [(data.x[i, :n], data.y[i, :n]) for i, n in enumerate(lengths)]
