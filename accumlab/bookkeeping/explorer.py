"""Lesson 10's explorer: k, epochs, step counter, where the run is interrupted and what the
checkpoint forgets → windows per optimizer step, their sizes, the logged loss, and how far the
resumed run drifts from the uninterrupted one."""

from __future__ import annotations

from functools import lru_cache

import ipywidgets as W

from .._validate import one_of, positive_int
from ..explorer import Explorer, int_slider
from .checkpoints import OMISSIONS, final_error, read_counts, resume
from .counters import COUNTERS
from .loop import Run, Setup, train

MAX_K, MAX_EPOCHS = 16, 4


@lru_cache(maxsize=8)
def _uninterrupted(setup: Setup) -> Run:
    # asked for again on every move of the interruption slider: run once, keeping the checkpoint
    # an interruption before each micro-step would write (the same state bit for bit: tested)
    return train(setup, keep_checkpoints=True)


def explorer_setup(k: int, epochs: int, counter: str) -> Setup:
    """The explorer's run: lesson 10's default data and model, `loss / k` in every window (a
    plain loop's scaling, so the logged loss shows the epoch boundaries)."""
    positive_int("k", k)
    if k > MAX_K:
        raise ValueError(f"k must be at most {MAX_K}, got {k}")
    positive_int("epochs", epochs)
    if epochs > MAX_EPOCHS:
        raise ValueError(f"epochs must be at most {MAX_EPOCHS}, got {epochs}")
    one_of("counter", counter, COUNTERS)
    return Setup(accumulation_steps=k, epochs=epochs, counter=counter, last_window="divide_by_k")


def bookkeeping_data(
    k: int = 4,
    epochs: int = 3,
    counter: str = "sync_at_epoch_end",
    stop_at: int = 153,
    omission: str = "none",
) -> dict:
    """Plain compute behind the explorer (tests call it directly). Lesson 10.

    Returns {"setup", "schedule", "logs" (uninterrupted run), "stop_at", "stop_step" (optimizer
    steps done at the interruption), "omission", "bit_exact", "rel_error" (final weights),
    "error_steps"/"errors" (relative distance from the uninterrupted weights after each step of
    the resumed run), "steps" (of the resumed run), "extra_reads", "missed_reads"}.
    """
    setup = explorer_setup(k, epochs, counter)
    one_of("omission", omission, OMISSIONS)
    total = setup.batches_per_epoch * epochs
    if isinstance(stop_at, bool) or not isinstance(stop_at, int) or not 0 < stop_at < total:
        raise ValueError(f"stop_at must be a micro-step in [1, {total - 1}], got {stop_at!r}")
    reference = _uninterrupted(setup)
    checkpoint = reference.checkpoints[stop_at]
    rest = resume(checkpoint, omit=omission)
    exact, err = final_error(rest, reference)
    n = min(len(rest.trajectory), len(reference.trajectory) - rest.first_step)
    errors = []
    for j in range(n):
        ref = reference.trajectory[rest.first_step + j]
        errors.append(float((rest.trajectory[j] - ref).norm() / ref.norm()))
    first = Run(setup, 0, 0, consumed=reference.consumed[:stop_at])  # what was read before it
    extra, missed = read_counts([first, rest], setup.samples, setup.epochs)
    return {
        "setup": setup,
        "schedule": setup.schedule(),
        "logs": reference.logs,
        "stop_at": stop_at,
        "stop_step": checkpoint["step"],
        "omission": omission,
        "bit_exact": exact,
        "rel_error": err,
        "error_steps": [rest.first_step + j + 1 for j in range(n)],
        "errors": errors,
        "steps": rest.steps,
        "extra_reads": extra,
        "missed_reads": missed,
    }


class BookkeepingExplorer(Explorer):
    """An Explorer with a line of numbers under the controls (text in an HTML widget costs
    nothing to redraw; drawn in the figure it would cost a text layout per move)."""

    def __init__(self, controls, compute, plot):
        self.summary = W.HTML()
        super().__init__(controls, compute, plot)
        row, output = self.widget.children
        self.widget = W.VBox([row, self.summary, output])

    def refresh(self) -> None:
        from .plots import explorer_summary

        super().refresh()
        self.summary.value = explorer_summary(self.data)


def bookkeeping_explorer() -> BookkeepingExplorer:
    """Build the lesson 10 explorer. The interruption slider's range follows the epochs slider,
    so every reachable setting is valid."""
    from .plots import LiveFigure

    k = int_slider("accumulation steps k", 4, 1, MAX_K)
    epochs = int_slider("epochs", 3, 1, MAX_EPOCHS)
    batches = Setup().batches_per_epoch
    stop = int_slider("interrupt after micro-step", 153, 1, batches * 3 - 1)
    counter = W.Dropdown(options=list(COUNTERS), value="sync_at_epoch_end", description="counter")
    omission = W.Dropdown(options=list(OMISSIONS), value="none", description="checkpoint forgets")

    def clamp_stop(change):
        stop.max = batches * change["new"] - 1  # ipywidgets clamps the value too

    epochs.observe(clamp_stop, names="value")

    def compute(k: int, epochs: int, counter: str, stop_at: int, omission: str):
        return bookkeeping_data(k, epochs, counter, stop_at, omission)

    controls = {"k": k, "epochs": epochs, "counter": counter, "stop_at": stop, "omission": omission}
    return BookkeepingExplorer(controls, compute, LiveFigure())
