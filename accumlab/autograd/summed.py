"""Lesson 01: summing n losses before one backward keeps n graphs alive; backward per sample keeps
one."""

from __future__ import annotations

from .._validate import positive_int
from ..graph import count_nodes
from ..losses import get_loss
from ..saved import saved_tensor_bytes


def summed_loss_graph(model, data, n: int, *, loss: str = "mse") -> dict:
    """Lesson 01: sum n per-sample losses before one backward vs backward per sample.

    Summing keeps all n graphs alive at once (nodes and saved bytes grow with n); calling backward
    per sample frees each graph before the next is built, so at most one sample's graph is alive.
    """
    positive_int("n", n)
    if n > len(data):
        raise ValueError(f"n must be at most the number of samples ({len(data)}), got {n}")
    loss_fn = get_loss(loss)
    # parameters and the data are alive anyway; slices of data.x are views of its whole storage
    params = [*model.parameters(), data.x, data.y]
    holder = {}

    def summed():
        holder["total"] = sum(
            loss_fn(model(data.x[i : i + 1]), data.y[i : i + 1])[0] for i in range(n)
        )

    summed_bytes = saved_tensor_bytes(summed, exclude=params)
    one_bytes = saved_tensor_bytes(lambda: loss_fn(model(data.x[:1]), data.y[:1]), exclude=params)
    one_nodes = count_nodes(loss_fn(model(data.x[:1]), data.y[:1])[0])
    return {
        "n": n,
        "summed_nodes": count_nodes(holder["total"]),
        "summed_saved_bytes": summed_bytes,
        "per_sample_nodes": one_nodes,
        "per_sample_saved_bytes": one_bytes,
    }
