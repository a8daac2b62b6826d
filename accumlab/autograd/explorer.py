"""Lesson 01: the explorer of graph size against the number of losses summed before backward."""

from __future__ import annotations

from ..explorer import Explorer, int_slider


def graph_growth_explorer(model=None, data=None) -> Explorer:
    """Lesson 01: how many samples are summed before backward → graph size and saved bytes."""
    from ..data import regression_data
    from ..models import mlp
    from .plots import GrowthPlot
    from .summed import explorer_inputs, graph_growth

    explorer_inputs(model, data)
    data = data if data is not None else regression_data(n=32, features=4, seed=0)
    model = model if model is not None else mlp(features=4, hidden=16, depth=2, seed=0)
    n = int_slider("samples summed n", 8, 1, len(data))

    def compute(n: int):
        return graph_growth(model, data, n)

    return Explorer({"n": n}, compute, GrowthPlot())
