"""Lesson 01: summing n losses before one backward keeps n graphs alive; backward per sample keeps
one; one batched forward of n samples keeps the same bytes as the sum in a graph of one sample's
size."""

from __future__ import annotations

import torch

from .. import _validate
from .._validate import positive_int
from ..engine import forward
from ..graph import count_nodes
from ..losses import get_loss
from ..saved import saved_storages

# after each of the n additions a batched forward of all samples so far is measured too, so the
# work grows as n²: n = 1000 takes seconds on a 2-core CPU, and the lessons use n ≤ 32
MAX_SUMMED = 1000


def graph_growth(model, data, n: int, *, loss: str = "mse") -> list[dict]:
    """Lesson 01: add per-sample losses into one total, one sample at a time, and record after each
    addition the backward nodes and saved bytes alive — next to a backward per sample (one sample's
    graph) and one batched forward of the same samples. One pass: n forwards, not n²/2.

    Returns one row per i = 1..n: {"n", "summed_nodes", "summed_saved_bytes", "per_sample_nodes",
    "per_sample_saved_bytes", "batched_nodes", "batched_saved_bytes"}.
    """
    _validate.model("model", model)
    _validate.data("data", data)
    positive_int("n", n, maximum=MAX_SUMMED, why="the work grows as n²")
    if n > len(data):
        raise ValueError(f"n must be at most the number of samples ({len(data)}), got {n}")
    loss_fn = get_loss(loss)
    # parameters and the data are alive anyway; slices of data.x are views of its whole storage
    exclude = [*model.parameters(), data.x, data.y]

    def one(i):
        return loss_fn(forward(model, data[i], f"sample {i}"), data.y[i : i + 1])[0]

    holder = {}
    per_sample_bytes = sum(saved_storages(lambda: holder.update(one=one(0)), exclude).values())
    per_sample_nodes = count_nodes(holder["one"])
    seen: dict = {}
    rows, total = [], None
    skip = {(t.device, t.untyped_storage().data_ptr()) for t in exclude}

    def pack(t: torch.Tensor):
        key = (t.device, t.untyped_storage().data_ptr())
        if key not in skip:
            seen[key] = t.untyped_storage().nbytes()
        return t

    def batched(size: int) -> tuple[int, int]:
        out = {}

        def forward():
            out["loss"] = loss_fn(model(data.x[:size]), data.y[:size])[0]

        return sum(saved_storages(forward, exclude).values()), count_nodes(out["loss"])

    for i in range(n):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            total = one(i) if total is None else total + one(i)
        batched_bytes, batched_nodes = batched(i + 1)
        rows.append(
            {
                "n": i + 1,
                "summed_nodes": count_nodes(total),
                "summed_saved_bytes": sum(seen.values()),
                "per_sample_nodes": per_sample_nodes,
                "per_sample_saved_bytes": per_sample_bytes,
                "batched_nodes": batched_nodes,
                "batched_saved_bytes": batched_bytes,
            }
        )
    return rows


def summed_loss_graph(model, data, n: int, *, loss: str = "mse") -> dict:
    """Lesson 01: sum n per-sample losses before one backward vs backward per sample vs one
    batched forward of the n samples: `graph_growth(...)`'s last row.

    Summing keeps all n graphs alive at once (nodes and saved bytes grow with n); calling backward
    per sample frees each graph's saved tensors before the next is built; a batched forward saves
    what the sum saves, in a graph with one sample's nodes.
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
