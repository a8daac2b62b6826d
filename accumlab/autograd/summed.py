"""Lesson 01: what four loops over n samples in micro-batches of m keep alive — the graph's nodes and
the bytes it saved for backward. Summing the micro-batch losses before one backward keeps every
micro-batch's graph; a backward after every micro-batch (accumulation) keeps one micro-batch's; the
same loop that also keeps `total = total + loss` for logging frees every saved tensor but keeps
every node (the leak of PyTorch's FAQ); one batched forward of n samples holds one forward's nodes.

The sum saves the batched forward's bytes only when everything a forward saves grows with the
batch: a tensor computed from the parameters alone (`weight_normed`, autocast) is saved once per
forward, n/m times by the sum and once by the batched forward."""

from __future__ import annotations

import copy

from .. import _validate
from .._validate import positive_int
from ..engine import forward
from ..graph import count_nodes
from ..losses import get_loss
from ..saved import LiveSavedTensors
from .forwards import check_autocast, region

# after each micro-batch a batched forward of all samples so far is measured too, so the work
# grows as (n/m)²: n = 1000 takes seconds on a 2-core CPU, and the lessons use n ≤ 32
MAX_SUMMED = 1000
LOOPS = ("summed", "accumulated", "logged", "batched")


def graph_growth(
    model, data, n: int, *, micro_batch: int = 1, autocast: bool = False, loss: str = "mse"
) -> list[dict]:
    """Lesson 01: run four loops over samples 0..n-1 of `data` in micro-batches of `micro_batch`
    samples (m; n a multiple of m) on a copy of `model` and record, after each micro-batch, the
    backward nodes the loop still holds (reachable from the tensors it keeps) and the most bytes
    of saved-for-backward tensors alive at once so far (`LiveSavedTensors.peak`):

    - "summed": `total = total + loss_j` per micro-batch, one backward after the last;
    - "accumulated": `loss_j.backward()` after every micro-batch, keeping only the last loss;
    - "logged": the same, plus `total = total + loss_j` kept for logging (without `.detach()`);
    - "batched": one forward of every sample so far at once.

    `autocast=True` runs each forward (and its loss) in its own bfloat16 autocast region (a
    float32 model and data). Returns one row per n' = m, 2m, ..., n: {"n", "<loop>_nodes",
    "<loop>_saved_bytes" for each loop}. Parameters and data are excluded from the bytes: they
    are alive whatever the loop does.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    positive_int("n", n, maximum=MAX_SUMMED, why="the work grows as n²")
    if n > len(data):
        raise ValueError(f"n must be at most the number of samples ({len(data)}), got {n}")
    m = positive_int("micro_batch", micro_batch, maximum=n, why=f"n = {n} samples in all")
    if n % m:
        raise ValueError(
            f"n must be a multiple of micro_batch: {n} samples do not split into micro-batches "
            f"of {m} (try n = {n - n % m})"
        )
    autocast = check_autocast(model, data, autocast)
    loss_fn = get_loss(loss)
    model = copy.deepcopy(model)  # the loops call backward: the caller's .grad stays untouched
    device = next(model.parameters()).device
    # slices of data.x are views of its storage: excluding data.x excludes every sample
    exclude = [*model.parameters(), data.x, data.y]

    def loss_of(start: int, stop: int):
        with region(autocast, device):  # one region per forward, as a training loop has
            out = forward(model, data[start:stop], f"samples {start}..{stop - 1}")
            return loss_fn(out, data.y[start:stop])[0]

    columns = {name: _loop(name, loss_of, model, exclude, n, m) for name in LOOPS}
    return [
        {"n": (j + 1) * m, **{k: col[j][k] for col in columns.values() for k in col[j]}}
        for j in range(n // m)
    ]


def _loop(name: str, loss_of, model, exclude, n: int, m: int) -> list[dict]:
    """One loop's row per micro-batch: the nodes it holds after it, the peak bytes so far."""
    rows, total, held = [], None, None
    with LiveSavedTensors(exclude=exclude) as live:
        for start in range(0, n, m):
            if name == "batched":
                held = None  # the forward of i samples goes before the forward of i + m
                held = loss_of(0, start + m)
            else:
                loss = loss_of(start, start + m)
                if name != "summed":
                    loss.backward()  # frees this micro-batch's saved tensors
                    model.zero_grad()  # keeps .grad from growing: it plays no part here
                if name == "accumulated":
                    held = loss
                else:  # summed and logged: the running total links every micro-batch's graph
                    total = held = loss if total is None else total + loss
            rows.append({f"{name}_nodes": count_nodes(held), f"{name}_saved_bytes": live.peak})
        if name == "summed":
            total.backward()  # the loop's one backward (the peak was reached before it)
    return rows


def summed_loss_graph(
    model, data, n: int, *, micro_batch: int = 1, autocast: bool = False, loss: str = "mse"
) -> dict:
    """Lesson 01: the four loops of `graph_growth` after n samples: its last row.

    Summing keeps every micro-batch's graph alive at once (nodes and saved bytes grow with n);
    a backward per micro-batch frees each graph's saved tensors before the next is built; keeping
    the losses for logging keeps the nodes but none of the saved bytes; a batched forward holds
    one forward's nodes, and saves what the sum saves when all a forward saves grows with the
    batch.
    """
    return graph_growth(model, data, n, micro_batch=micro_batch, autocast=autocast, loss=loss)[-1]


def explorer_inputs(model, data) -> None:
    """What `graph_growth_explorer` is given, checked before its controls are built."""
    if model is not None:
        _validate.model("model", model)
    if data is not None:
        _validate.data("data", data)
        if len(data) > MAX_SUMMED:
            raise ValueError(
                f"data holds {len(data)} samples; the explorer runs up to len(data) and "
                f"graph_growth takes at most n = {MAX_SUMMED} (the work grows as n²): pass "
                f"data[:{MAX_SUMMED}]"
            )
