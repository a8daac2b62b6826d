"""The words of the findings about what a loop does at an epoch's end: a short last window
dropped, carried into the next epoch's first step, or continued across epochs (lesson 08).
Templates as in `messages.py`, which merges these into its table."""

from __future__ import annotations

LAST_WINDOW_FIX = (
    ' If that is your intent, say so: al.audit(..., last_window="{policy}") audits it clean.'
)

_NEVER = (
    "The short last window of each epoch ({size} micro-batch(es), {samples} samples) never "
    "reaches an optimizer step in its epoch: {how}"
)

_CARRIED = (
    "The short last window of each epoch ({size} micro-batch(es)) never reaches an optimizer "
    "step in its epoch, and nothing zeroes its gradient when the next epoch starts: the next "
    "epoch's first step (step {step}) adds it to that epoch's first {own} micro-batch(es), so "
    "it saw {total} micro-batches at once"
)
_CARRIED_FIX = (
    " Step once more when an epoch ends inside a window (dividing that window by its size), or "
    'zero the gradients when an epoch starts and audit with last_window="drop".'
)

EPOCH_MESSAGES: dict[str, str | dict[str, str]] = {
    "LAST_WINDOW_DROPPED": {
        "zeroed": (
            _NEVER + ", and their gradient is zeroed before the next epoch's first step (measured "
            "at step(s) {steps}: each saw only its own epoch's micro-batches). Each epoch trains on "
            "{used} of its {total} samples, and the left-out ones are the same every epoch unless "
            "the data is shuffled.{leftover}"
            + LAST_WINDOW_FIX
            + " Otherwise step once more when the epoch ends inside a window."
        ),
        "one_epoch": (
            _NEVER + ". The audit ran one epoch, so it cannot tell whether the next epoch's first "
            "step discards their gradient (then each epoch trains on {used} of its {total} "
            "samples) or adds it (then that step is too large): audit with epochs=2 to see."
            "{leftover}" + LAST_WINDOW_FIX
        ),
        "unknown": (
            _NEVER + ". What the next epoch's first step did with their gradient could not be "
            "told from its gradient (see the other findings).{leftover}" + LAST_WINDOW_FIX
        ),
    },
    "LAST_WINDOW_CARRIED": {
        "measured": (
            _CARRIED + ": ‖seen‖ / ‖their mean‖ = {measured:.3g}, where a step over those {total} "
            "micro-batches would give 1{why}. No sample is lost, but that step is {measured:.3g} "
            "times the mean of what it holds, and it differs from the reference's step (this "
            "epoch's first {own} micro-batch(es)) in length and direction"
            "{end}" + _CARRIED_FIX
        ),
        "clipped": (
            _CARRIED + "{why}. Clipping (max_norm = {max_norm:g}) then shortened that step, so "
            "its size does not show here (with clipping that does not bite, the audit measures "
            "it). No sample is lost, but that step held {total} micro-batches where a window holds k = {k}"
            "{end}" + _CARRIED_FIX
        ),
    },
    "WINDOWS_CROSS_EPOCHS": (
        "Your loop's windows run across epochs: its step counter is not reset when an epoch "
        "ends, so each epoch's short last window ({size} micro-batch(es)) continues into the next "
        "epoch, and the optimizer stepped after micro-batches {seen} counted over the run (every "
        "k = {k}) instead of {expected}. {weighed}{leftover}{fix}"
    ),
    "CARRIED_WINDOW_ZEROED": (
        "Your loop's windows run across epochs (its step counter carries over: the optimizer "
        "stepped after micro-batches {seen} counted over the run, every k = {k}), but the "
        "gradients are zeroed when an epoch starts: at step {step} the first {gone} of the "
        "window's {size} micro-batches, forwarded at the end of the previous epoch, had been "
        "erased, and only the last {kept} reached the optimizer. The step condition is not the "
        "bug: zero only right after optimizer.step(), or reset the counter where you zero (then "
        "the windows restart with each epoch)."
    ),
}

# WINDOWS_CROSS_EPOCHS, as measured against windows that run across epochs: (every step matched,
# the run ended on a step) -> what to say
WEIGHED = {
    (True, True): (
        "Every window held k micro-batches and its gradient matched their mean, so no sample is "
        "lost and none weighs more than another: the windows simply do not restart with the "
        "epoch."
    ),
    (True, False): (
        "Every window that reached a step held k micro-batches and its gradient matched their mean."
    ),
    (False, True): "The other findings say what each window's step saw.",
    (False, False): "The other findings say what each window's step saw.",
}
CHECK_AS_CARRY = (
    ' Audit with last_window="carry" to check every window as your loop forms them, the run\'s '
    "last one included."
)
RUN_END = (
    "The run's last window ({size} micro-batch(es)) never reaches an optimizer step: with "
    "windows across epochs only the very end of the run leaves one short, and it is left "
    "unused.{leftover} Step once more when the run ends inside a window, dividing it by its size."
)
