"""Lesson 10's explorer: k, epochs, step counter, where the run is interrupted and how the resume
differs (what the checkpoint forgets) → windows per optimizer step, their sizes, the logged loss,
and how far the resumed run drifts from the uninterrupted one."""

from __future__ import annotations

from functools import lru_cache

import ipywidgets as W

from .._validate import one_of, positive_int
from ..explorer import Explorer, int_slider
from .checkpoints import OMISSIONS, final_error, read_counts, resume
from .counters import COUNTERS
from .loop import Run, Setup, train
from .loop import stop_at_in as _stop_at

MAX_K, MAX_EPOCHS = 16, 4
# 23 = 5 × 4 + 3 micro-batches per epoch: the same remainder as the lesson's 103 at k = 4, and a
# run short enough (69 micro-steps over 3 epochs) to recompute on every move; at most 31 (a run
# of at most 124 micro-steps: a move that changes the run trains it once and resumes it once)
BATCHES, MIN_BATCHES, MAX_BATCHES = 23, 2, 31


@lru_cache(maxsize=8)
def _uninterrupted(setup: Setup) -> Run:
    # asked for again on every move of the interruption slider: run once, keeping the checkpoint
    # an interruption before each micro-step would write (the same state bit for bit: tested)
    return train(setup, keep_checkpoints=True)


def explorer_setup(k: int, epochs: int, counter: str, batches_per_epoch: int = BATCHES) -> Setup:
    """The explorer's run: lesson 10's model and data (`batches_per_epoch` micro-batches of 4
    samples per epoch), `loss / k` in every window (a plain loop's scaling, so the logged loss
    shows the epoch boundaries)."""
    k = positive_int("k", k)
    if k > MAX_K:
        raise ValueError(f"k must be at most {MAX_K}, got {k}")
    epochs = positive_int("epochs", epochs)
    if epochs > MAX_EPOCHS:
        raise ValueError(f"epochs must be at most {MAX_EPOCHS}, got {epochs}")
    one_of("counter", counter, COUNTERS)
    batches_per_epoch = positive_int("batches_per_epoch", batches_per_epoch, minimum=MIN_BATCHES)
    if batches_per_epoch > MAX_BATCHES:
        raise ValueError(
            f"batches_per_epoch must be at most {MAX_BATCHES}, got {batches_per_epoch}"
        )
    return Setup(
        accumulation_steps=k,
        epochs=epochs,
        counter=counter,
        last_window="divide_by_k",
        batches_per_epoch=batches_per_epoch,
    )


def bookkeeping_data(
    k: int = 4,
    epochs: int = 3,
    counter: str = "sync_at_epoch_end",
    stop_at: int = 33,
    omission: str = "none",
    batches_per_epoch: int = BATCHES,
) -> dict:
    """Plain compute behind the explorer (tests call it directly). Lesson 10.

    Returns {"setup", "schedule", "logs" (uninterrupted run; empty when the run never steps),
    "stop_at", "stop_step" (optimizer steps done at the interruption), "in_window" (micro-batches
    of the window in progress, their gradient in .grad, at the interruption), "omission",
    "bit_exact", "rel_error" (final weights), "error_steps"/"errors" (relative distance from the
    uninterrupted weights after each step of the resumed run), "steps" (of the resumed run),
    "extra_reads", "missed_reads"}.
    """
    setup = explorer_setup(k, epochs, counter, batches_per_epoch)
    one_of("omission", omission, OMISSIONS)
    total = setup.batches_per_epoch * epochs
    stop_at = _stop_at(stop_at, total)
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
        "in_window": stop_at - setup.schedule().position_after(checkpoint["step"]),
        "omission": omission,
        "bit_exact": exact,
        "rel_error": err,
        "error_steps": [rest.first_step + j + 1 for j in range(n)],
        "errors": errors,
        "steps": rest.steps,
        "extra_reads": extra,
        "missed_reads": missed,
    }


def bookkeeping_explorer() -> Explorer:
    """Build the lesson 10 explorer. The interruption slider's range follows the epochs and
    batches sliders, so every reachable setting is valid (one that never reaches an optimizer
    step, k above the micro-batches the counter ever sees, is drawn and said as such); a shorter run
    clamps the interruption and a longer one restores the learner's choice. Its numbers are a line
    of text above the figure (`explorer_summary`): text in HTML costs nothing to redraw."""
    from .plots import explorer_summary, plot_bookkeeping_explorer, update_bookkeeping_explorer

    k = int_slider("accumulation steps k", 4, 1, MAX_K)
    epochs = int_slider("epochs", 3, 1, MAX_EPOCHS)
    batches = int_slider("micro-batches per epoch", BATCHES, MIN_BATCHES, MAX_BATCHES)
    stop = int_slider("interrupt after micro-batches", 33, 1, BATCHES * 3 - 1)
    counter = W.Dropdown(options=list(COUNTERS), value="sync_at_epoch_end", description="counter")
    omission = W.Dropdown(options=list(OMISSIONS), value="none", description="resume")

    # the interruption the learner chose: a shorter run clamps the slider, and a longer one gives
    # that choice back instead of leaving the clamped value
    chosen, clamping = {"stop": stop.value}, {"now": False}

    def remember(change):
        if not clamping["now"]:
            chosen["stop"] = change["new"]

    def clamp_stop(_change):
        clamping["now"] = True
        try:
            stop.max = batches.value * epochs.value - 1  # ipywidgets clamps the value too
            stop.value = min(chosen["stop"], stop.max)
        finally:
            clamping["now"] = False

    # registered before the Explorer's own observers: the range is right when it recomputes (and
    # the Explorer skips the second call for values it already shows: one computation per move)
    stop.observe(remember, names="value")
    epochs.observe(clamp_stop, names="value")
    batches.observe(clamp_stop, names="value")

    def compute(k, epochs, batches_per_epoch, counter, stop_at, omission):
        return bookkeeping_data(k, epochs, counter, stop_at, omission, batches_per_epoch)

    controls = {
        "k": k,
        "epochs": epochs,
        "batches_per_epoch": batches,
        "counter": counter,
        "stop_at": stop,
        "omission": omission,
    }
    return Explorer(
        controls,
        compute,
        plot_bookkeeping_explorer,
        update_bookkeeping_explorer,
        caption=explorer_summary,
    )
