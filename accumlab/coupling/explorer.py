"""Lesson 09's explorer: the coupling, the micro-batch size, k and (for the load-balancing loss)
the token order → the gap to the big batch of naive accumulation, of running counts (aux_loss
only) and of the fix. `explore_coupling` is the plain compute function tests call directly;
`coupling_gaps` gives any coupling's row."""

from __future__ import annotations

from functools import lru_cache

from .._threads import one_thread
from .._validate import one_of, positive_int
from .gaps import COUPLINGS, TOKENS, WINDOW, coupling_gaps

MICRO_SIZES = (1, 2, 4, 8, 16, 32, 64)
# most micro-batches per step the slider offers: it bounds a move's work to 16 micro-steps per
# loop (4 optimizer steps × 16 for the EMA)
K_MAX = 16


@lru_cache(maxsize=512)  # the data are fixed: a setting seen before costs nothing
def _row(coupling: str, micro_batch_size: int, accumulation_steps: int, tokens: str) -> dict:
    return coupling_gaps(coupling, micro_batch_size, accumulation_steps, tokens)


@one_thread()
def explore_coupling(
    coupling: str = "contrastive",
    micro_batch_size: int = 8,
    accumulation_steps: int = 4,
    tokens: str = TOKENS[0],
) -> dict:
    """The chosen coupling's gaps at this micro-batch size, k and token order (one row; each
    move recomputes one coupling only, and a setting seen before is cached). Lesson 09."""
    one_of("coupling", coupling, COUPLINGS)
    one_of("tokens", tokens, TOKENS)
    mb = positive_int("micro_batch_size", micro_batch_size)
    k = positive_int("accumulation_steps", accumulation_steps)
    if coupling != "aux_loss":
        tokens = TOKENS[0]  # only the load-balancing loss reads the order: one cache entry
    return {"coupling": coupling, "rows": [dict(_row(coupling, mb, k, tokens))]}


def coupling_explorer():
    """Build lesson 09's explorer: the figure is built once, and a change moves its bars
    (`update_coupling_figure`); the numbers are in the caption. Slider ranges keep micro-batch
    size × k within the WINDOW samples the couplings hold, and k ≤ K_MAX."""
    import ipywidgets as W

    from ..explorer import Explorer, int_slider, selection_slider
    from .plots import coupling_caption, plot_coupling_explorer, update_coupling_figure

    mb = selection_slider("micro-batch size", MICRO_SIZES, 8)
    k = int_slider("accumulation steps k", 4, 1, min(K_MAX, WINDOW // 8))
    coupling = W.Dropdown(options=list(COUPLINGS), value="contrastive", description="coupling")
    tokens = W.Dropdown(options=list(TOKENS), value=TOKENS[0], description="aux_loss tokens")

    def clamp_k(change):
        k.max = min(K_MAX, WINDOW // change["new"])  # keeps micro_batch_size × k ≤ WINDOW

    mb.observe(clamp_k, names="value")
    controls = {
        "coupling": coupling,
        "micro_batch_size": mb,
        "accumulation_steps": k,
        "tokens": tokens,
    }
    return Explorer(
        controls,
        explore_coupling,
        plot_coupling_explorer,
        update_coupling_figure,
        caption=coupling_caption,
    )
