"""Lesson 01: the explorer of what four loops keep alive against the number of samples."""

from __future__ import annotations

from ..explorer import Explorer, int_slider


def graph_growth_explorer(model=None, data=None) -> Explorer:
    """Lesson 01: the number of samples n → the nodes and saved bytes four loops keep alive
    (`graph_growth`): summed before one backward, backward per sample, the same while keeping the
    losses for logging, one batched forward."""
    from ..data import regression_data
    from ..models import mlp
    from .plots import graph_growth_caption, plot_graph_growth, update_graph_growth
    from .summed import explorer_inputs, graph_growth

    explorer_inputs(model, data)
    data = data if data is not None else regression_data(n=32, features=4, seed=0)
    model = model if model is not None else mlp(features=4, hidden=16, depth=2, seed=0)
    n = int_slider("samples n", 8, 1, len(data))
    # graph_growth measures its row i after the i-th sample, from samples 0..i-1 alone, so one
    # pass up to n holds the rows of every smaller n: a move down is a slice, a move up one pass
    # (the explorer's model and data are its own, or the caller's, left as they are)
    rows: list[dict] = []

    def compute(n: int):
        if n > len(rows):
            rows[:] = graph_growth(model, data, n)
        return rows[:n]

    return Explorer(
        {"n": n}, compute, plot_graph_growth, update_graph_growth, caption=graph_growth_caption
    )
