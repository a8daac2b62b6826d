"""Lesson 01: the explorer of what four loops keep alive, by micro-batch size and by what each
forward saves."""

from __future__ import annotations

import ipywidgets as W

from ..explorer import Explorer, selection_slider

MICRO_BATCHES = (1, 2, 4, 8)
# what each forward saves: activations only; + weights computed by weight_norm; + autocast copies
SAVES = ("activations only", "+ weight_norm weights", "+ bf16 autocast copies")


def graph_growth_explorer(model=None, data=None) -> Explorer:
    """Lesson 01: the micro-batch size m and what each forward saves → the nodes and saved bytes
    four loops keep alive after n = m, 2m, ... samples (`graph_growth`): summed before one
    backward, a backward per micro-batch, the same keeping the losses for logging, one batched
    forward. "+ weight_norm weights" runs `weight_normed(model)`; "+ bf16 autocast copies" a
    float32 copy with each forward in its own autocast region."""
    import torch

    from ..data import regression_data
    from ..models import mlp
    from .forwards import weight_normed
    from .plots import graph_growth_caption, plot_graph_growth, update_graph_growth
    from .summed import explorer_inputs, graph_growth

    explorer_inputs(model, data)
    # 16 samples: each setting is measured once, when first chosen; the work grows as (n/m)²
    data = data if data is not None else regression_data(n=16, features=4, seed=0)
    model = model if model is not None else mlp(features=4, hidden=16, depth=2, seed=0)
    sizes = [m for m in MICRO_BATCHES if m <= len(data)]
    # the caller's model and data are left as they are: each variant is a copy
    variants = {
        SAVES[0]: (model, data, False),
        SAVES[1]: (weight_normed(model), data, False),
        SAVES[2]: (_float32(model), data.to(dtype=torch.float32), True),
    }
    controls = {
        "m": selection_slider("micro-batch m", sizes, sizes[0]),
        "saves": W.Dropdown(
            options=list(SAVES),
            value=SAVES[0],
            description="each forward saves",
            style={"description_width": "initial"},
        ),
    }
    cache: dict[tuple, list[dict]] = {}  # a setting seen once is a lookup the next time

    def compute(m: int, saves: str):
        if (m, saves) not in cache:
            net, samples, autocast = variants[saves]
            n = len(samples) - len(samples) % m  # every sample that fills a micro-batch
            cache[m, saves] = graph_growth(net, samples, n, micro_batch=m, autocast=autocast)
        return cache[m, saves]

    return Explorer(
        controls, compute, plot_graph_growth, update_graph_growth, caption=graph_growth_caption
    )


def _float32(model):
    import copy

    return copy.deepcopy(model).float()
