"""Lesson 09's explorer: the coupling, the micro-batch size and k → the gap to the big batch of
naive accumulation and of the fix, for every coupling side by side. `explore_coupling` is the
plain compute function tests call directly."""

from __future__ import annotations

from functools import lru_cache

from .._threads import one_thread
from .._validate import one_of
from .gaps import COUPLINGS, WINDOW, coupling_gaps

MICRO_SIZES = (2, 4, 8, 16, 32, 64)


@lru_cache(maxsize=64)  # the data are fixed: a setting seen before costs nothing
def _rows(micro_batch_size: int, accumulation_steps: int) -> tuple[dict, ...]:
    # one_thread around all five (not around each): switching torch's thread count back and
    # forth between the calls made them about twice as slow on a 2-core machine
    with one_thread():
        return tuple(coupling_gaps(c, micro_batch_size, accumulation_steps) for c in COUPLINGS)


def explore_coupling(
    coupling: str = "contrastive", micro_batch_size: int = 8, accumulation_steps: int = 4
) -> dict:
    """Every coupling's naive and fixed gap at this micro-batch size and k; `coupling` is the one
    the explorer highlights. Lesson 09."""
    one_of("coupling", coupling, COUPLINGS)
    rows = _rows(micro_batch_size, accumulation_steps)
    return {"coupling": coupling, "rows": [dict(r) for r in rows]}


def coupling_explorer():
    """Build lesson 09's explorer: the figure is built once, and a change moves its bars and
    texts (`update_coupling_figure`). Slider ranges keep micro-batch size × k within the WINDOW
    samples the couplings hold."""
    import ipywidgets as W

    from ..explorer import Explorer, int_slider, selection_slider
    from .plots import coupling_caption, plot_coupling_explorer, update_coupling_figure

    mb = selection_slider("micro-batch size", MICRO_SIZES, 8)
    k = int_slider("accumulation steps k", 4, 1, WINDOW // 8)
    coupling = W.Dropdown(options=list(COUPLINGS), value="contrastive", description="coupling")

    def clamp_k(change):
        k.max = WINDOW // change["new"]  # keeps micro_batch_size × k ≤ WINDOW

    mb.observe(clamp_k, names="value")
    controls = {"coupling": coupling, "micro_batch_size": mb, "accumulation_steps": k}
    return Explorer(
        controls,
        explore_coupling,
        plot_coupling_explorer,
        update_coupling_figure,
        caption=coupling_caption,
    )
