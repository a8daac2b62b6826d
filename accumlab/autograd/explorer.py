"""Lesson 01: the explorer of graph size against the number of losses summed before backward."""

from __future__ import annotations

from ..explorer import Explorer, int_slider


def graph_growth_explorer(model=None, data=None) -> Explorer:
    """Lesson 01: how many samples are summed before backward → graph size and saved bytes."""
    from ..data import regression_data
    from ..models import mlp
    from .plots import plot_graph_growth, update_graph_growth
    from .summed import explorer_inputs, graph_growth

    explorer_inputs(model, data)
    data = data if data is not None else regression_data(n=32, features=4, seed=0)
    model = model if model is not None else mlp(features=4, hidden=16, depth=2, seed=0)
    n = int_slider("samples summed n", 8, 1, len(data))
    # graph_growth measures its row i after the i-th addition, from samples 0..i-1 alone, so one
    # pass up to n holds the rows of every smaller n: a move down is a slice, a move up one pass
    # (the explorer's model and data are its own, or the caller's, left as they are)
    rows: list[dict] = []

    def compute(n: int):
        if n > len(rows):
            rows[:] = graph_growth(model, data, n)
        return rows[:n]

    return Explorer({"n": n}, compute, plot_graph_growth, update_graph_growth)
