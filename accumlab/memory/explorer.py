"""Lesson 05's explorer: micro-batch size, k, model size, optimizer and checkpointing → memory
breakdown and step time. `explore_memory` is the plain compute function tests call directly."""

from __future__ import annotations

import statistics

from .. import device as dev
from .._validate import flag, one_of, positive_int
from ..optim import OPTIMIZERS
from .parts import activation_bytes, data_bytes, memory_setup, setup_bytes
from .peaks import Footprint, footprint
from .throughput import step_times

MICRO_SIZES = (1, 2, 4, 8, 16, 32, 64)
WIDTHS = (32, 64, 128, 256)
REPEATS = 3  # timings per bar: the median is drawn, the range as a whisker


def explore_memory(
    micro_batch_size: int = 64,
    accumulation_steps: int = 8,
    width: int = 32,
    depth: int = 4,
    optimizer: str = "sgd",
    checkpointing: bool = False,
) -> dict:
    """Footprint (the estimate: named tensors, no measured peak) and seconds per optimizer step
    (median and range of `REPEATS` timings) for micro-batches of `micro_batch_size` × k, and the
    same global batch in one go (k = 1). Checkpointing cuts the model into 2 segments."""
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    accumulation_steps = positive_int("accumulation_steps", accumulation_steps)
    one_of("optimizer", optimizer, OPTIMIZERS)
    flag("checkpointing", checkpointing)
    width = positive_int("width", width)
    depth = positive_int("depth", depth)
    global_batch = micro_batch_size * accumulation_steps
    limit = dev.total_memory("cpu") // 2
    if setup_bytes(width, depth, global_batch) > limit:  # name what the learner set
        raise ValueError(
            f"micro_batch_size={micro_batch_size} × accumulation_steps={accumulation_steps} = "
            f"{global_batch} samples of width {width} would need more than half of this "
            f"machine's {limit * 2 / 2**30:.1f} GiB to train: choose a smaller micro-batch or k"
        )
    model, data = memory_setup(width, depth, global_batch)
    segments = 2 if checkpointing else 0
    # named tensors only: measuring the peak too would cost a tracked step per slider move
    chosen = footprint(
        model, data, micro_batch_size, optimizer=optimizer, segments=segments, measure=False
    )
    # the same parts but one micro-batch of everything (its activations measured alone)
    full = Footprint(
        **{
            **chosen.as_dict(),
            "data": data_bytes(data),
            "activations": activation_bytes(model, data, segments=segments),
            "accumulation_steps": 1,
        }
    )
    timing = dict(optimizer=optimizer, segments=segments, repeats=REPEATS)
    mine = step_times(model, data, micro_batch_size, **timing)
    whole = step_times(model, data, global_batch, **timing)
    return {
        "micro_batch_size": micro_batch_size,
        "accumulation_steps": accumulation_steps,
        "global_batch": global_batch,
        "optimizer": optimizer,
        "checkpointing": checkpointing,
        "footprint": chosen.as_dict(),
        "full_batch": full.as_dict(),
        "seconds": statistics.median(mine),
        "full_seconds": statistics.median(whole),
        "seconds_range": [min(mine), max(mine)],
        "full_seconds_range": [min(whole), max(whole)],
    }


def memory_explorer():
    """Lesson 05: sliders and switches for the memory/throughput trade-off. Every reachable
    combination is valid: sizes come from fixed lists, checkpointing uses 2 segments (any depth
    gives at least 2 layers with the head)."""
    import ipywidgets as W

    from ..explorer import Explorer, int_slider
    from ..explorer import selection_slider as choice
    from .explorer_plots import plot_memory_explorer, update_memory_explorer

    controls = {
        # defaults where activations, not the floor, set the memory: accumulation visibly saves
        "micro_batch_size": choice("micro-batch size", MICRO_SIZES, 64),
        "accumulation_steps": int_slider("k", 8, 1, 8),
        "width": choice("width", WIDTHS, 32),
        "depth": int_slider("depth", 4, 1, 8),
        "optimizer": W.Dropdown(options=list(OPTIMIZERS), value="sgd", description="optimizer"),
        "checkpointing": W.Checkbox(value=False, description="checkpointing"),
    }
    return Explorer(controls, explore_memory, plot_memory_explorer, update_memory_explorer)
