"""Lesson 01: what four loops over n samples keep alive — the graph's nodes and the bytes it saved
for backward. Summing n losses before one backward keeps n graphs; a backward after every sample
keeps one sample's; the same loop that also keeps `total = total + loss` for logging frees every
saved tensor but keeps every node (the leak of PyTorch's FAQ); one batched forward of n samples
saves what the sum saves, in a graph with one sample's nodes."""

from __future__ import annotations

import copy

from .. import _validate
from .._validate import positive_int
from ..engine import forward
from ..graph import count_nodes
from ..losses import get_loss
from ..saved import LiveSavedTensors

# after each of the n samples a batched forward of all samples so far is measured too, so the
# work grows as n²: n = 1000 takes seconds on a 2-core CPU, and the lessons use n ≤ 32
MAX_SUMMED = 1000
LOOPS = ("summed", "per_sample", "logged", "batched")


def graph_growth(model, data, n: int, *, loss: str = "mse") -> list[dict]:
    """Lesson 01: run four loops over samples 0..n-1 of `data` on a copy of `model` and record,
    after each sample i, the backward nodes the loop still holds (reachable from the tensors it
    keeps) and the most bytes of saved-for-backward tensors alive at once so far
    (`LiveSavedTensors.peak`):

    - "summed": `total = total + loss_i`, one backward after the n-th sample;
    - "per_sample": `loss_i.backward()` after every sample, keeping only the last loss;
    - "logged": the same, plus `total = total + loss_i` kept for logging (without `.detach()`);
    - "batched": one forward of samples 0..i at once.

    Returns one row per i = 1..n: {"n", "<loop>_nodes", "<loop>_saved_bytes" for each loop}.
    Parameters and data are excluded from the bytes: they are alive whatever the loop does.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    positive_int("n", n, maximum=MAX_SUMMED, why="the work grows as n²")
    if n > len(data):
        raise ValueError(f"n must be at most the number of samples ({len(data)}), got {n}")
    loss_fn = get_loss(loss)
    model = copy.deepcopy(model)  # the loops call backward: the caller's .grad stays untouched
    # slices of data.x are views of its storage: excluding data.x excludes every sample
    exclude = [*model.parameters(), data.x, data.y]

    def one(i):
        return loss_fn(forward(model, data[i], f"sample {i}"), data.y[i : i + 1])[0]

    columns = {name: _loop(name, one, model, data, loss_fn, exclude, n) for name in LOOPS}
    return [
        {"n": i + 1, **{key: column[i][key] for column in columns.values() for key in column[i]}}
        for i in range(n)
    ]


def _loop(name: str, one, model, data, loss_fn, exclude, n: int) -> list[dict]:
    """One loop's row per sample: the nodes it holds after the sample, the peak bytes so far."""
    rows, total, held = [], None, None
    with LiveSavedTensors(exclude=exclude) as live:
        for i in range(n):
            if name == "batched":
                held = None  # the forward of i samples goes before the forward of i + 1
                held = loss_fn(forward(model, data[: i + 1], f"samples 0..{i}"), data.y[: i + 1])[0]
            else:
                loss = one(i)
                if name != "summed":
                    loss.backward()  # frees this sample's saved tensors
                    model.zero_grad()  # keeps .grad from growing: it plays no part here
                if name == "per_sample":
                    held = loss
                else:  # summed and logged: the running total links every sample's graph
                    total = held = loss if total is None else total + loss
            rows.append({f"{name}_nodes": count_nodes(held), f"{name}_saved_bytes": live.peak})
        if name == "summed":
            total.backward()  # the loop's one backward (the peak was reached before it)
    return rows


def summed_loss_graph(model, data, n: int, *, loss: str = "mse") -> dict:
    """Lesson 01: the four loops of `graph_growth` after n samples: its last row.

    Summing keeps all n graphs alive at once (nodes and saved bytes grow with n); calling backward
    per sample frees each graph's saved tensors before the next is built; keeping the losses for
    logging keeps the nodes but none of the saved bytes; a batched forward saves what the sum
    saves, in a graph with one sample's nodes.
    """
    return graph_growth(model, data, n, loss=loss)[-1]


def explorer_inputs(model, data) -> None:
    """What `graph_growth_explorer` is given, checked before its slider (1..len(data)) is built."""
    if model is not None:
        _validate.model("model", model)
    if data is not None:
        _validate.data("data", data)
        if len(data) > MAX_SUMMED:
            raise ValueError(
                f"data holds {len(data)} samples; the explorer's slider runs up to len(data) and "
                f"graph_growth takes at most n = {MAX_SUMMED} (the work grows as n²): pass "
                f"data[:{MAX_SUMMED}]"
            )
