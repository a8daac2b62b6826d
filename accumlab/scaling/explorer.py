"""Lesson 03's explorer: micro-batch size, accumulation steps, normalisation, last-window policy and
spread of sequence lengths → gradient error per window and per-token weights.
"""

from __future__ import annotations

from .._threads import one_thread
from .._validate import positive_int
from ..data import token_data
from ..engine import LAST_WINDOW_POLICIES, NORMALIZATIONS, Recipe
from ..models import TinyLM
from .tokens import per_token
from .weights import effective_weights, window_errors

SEQUENCES = 20  # 20 is not a multiple of most micro-batch × k: short last windows appear
CENTRE = 12  # sequence lengths are drawn from [CENTRE - spread, CENTRE + spread]
MAX_SPREAD = CENTRE - 1  # keeps every sequence at ≥ 1 real token: no 0/0 reachable
SPREAD_WHY = f"lengths are drawn from {CENTRE} ± spread and each needs at least one real token"
VOCAB = 16


@one_thread()  # tiny ops: a second torch thread costs more than it computes
def loss_scaling_data(
    micro_batch_size: int = 3,
    accumulation_steps: int = 3,
    normalization: str = "mean",
    last_window: str = "divide_by_k",
    spread: int = 8,
    *,
    seed: int = 0,
) -> dict:
    """Plain compute behind the explorer (tests call it directly). Lesson 03.

    Returns {"recipe", "lengths", "checks" (per-window WindowCheck), "weights" (Weights),
    "ratio" (per-token weight ÷ full-batch weight, shape (sequences, max length))}.
    """
    spread = positive_int("spread", spread, minimum=0, maximum=MAX_SPREAD, why=SPREAD_WHY)
    recipe = Recipe(micro_batch_size, accumulation_steps, normalization, last_window)
    data = token_data(
        SEQUENCES, min_len=CENTRE - spread, max_len=CENTRE + spread, vocab=VOCAB, seed=seed
    )
    model = TinyLM(vocab=VOCAB, dim=8, seed=seed)
    lengths = data.lengths().tolist()
    weights = effective_weights(lengths, recipe)
    ratio = per_token(weights.per_item / weights.reference, lengths)
    checks = window_errors(recipe, model, data, loss="cross_entropy")
    return {
        "recipe": recipe,
        "lengths": lengths,
        "checks": checks,
        "weights": weights,
        "ratio": ratio,
    }


def loss_scaling_explorer():
    """Lesson 03: sliders and menus for every loss-scaling choice. Only valid values are
    reachable: k is capped so that at least one full window fits, spread keeps lengths ≥ 1."""
    import ipywidgets as W

    from ..explorer import Explorer, int_slider
    from .plots import plot_scaling_explorer, update_scaling_explorer

    mb = int_slider("micro-batch (sequences)", 3, 1, SEQUENCES // 2)
    k = int_slider("accumulation steps k", 3, 1, SEQUENCES // 3)
    style = {"description_width": "initial"}
    norm = W.Dropdown(
        options=list(NORMALIZATIONS), value="mean", description="normalisation", style=style
    )
    last = W.Dropdown(
        options=list(LAST_WINDOW_POLICIES),
        value="divide_by_k",
        description="last window",
        style=style,
    )
    spread = int_slider("length spread ±", 8, 0, MAX_SPREAD)

    def clamp_k(change):
        k.max = max(1, SEQUENCES // change["new"])  # micro-batch × k ≤ sequences: one full window

    mb.observe(clamp_k, names="value")
    controls = {
        "micro_batch_size": mb,
        "accumulation_steps": k,
        "normalization": norm,
        "last_window": last,
        "spread": spread,
    }
    return Explorer(controls, loss_scaling_data, plot_scaling_explorer, update_scaling_explorer)
