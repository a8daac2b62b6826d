"""Lesson 00 exercises: the words of the lessons, and setting an explorer's controls."""

from __future__ import annotations

import torch

from . import exercise
from ._answers import integer


@exercise("00.1", 1, "Samples in one optimizer step")
def _samples_per_step(answer):
    # micro-batches of 6, k = 4, on 2 GPUs each running its own micro-batches: 6 · 4 · 2 = 48
    n = integer(answer)  # 48, 48.0, np.int64(48), torch.tensor(48) alike; 48.5 gets a hint
    wrong = {
        24: "that is one GPU's window: each GPU runs its own k micro-batches",
        12: "each GPU runs k micro-batches before the step, not one",
        8: "count the samples: each micro-batch holds 6 of them",
    }
    return (
        None if n == 48 else wrong.get(n, "a window is micro-batch size × k samples, on each GPU")
    )


@exercise("00.2", 1, "Set an explorer's controls")
def _explorer_setting(answer):
    # answer: lesson 00's explorer, set (with the widget or from code) to zero_grad at the top of
    # every iteration, 24 samples in 3 micro-batches
    from ..accumulation.explorer import _default_problem
    from ..accumulation.progress import window_progress
    from ..explorer import Explorer

    if isinstance(answer, (tuple, list)):
        return (
            "answer with the explorer itself, once its controls are set "
            "(explorer.controls[name].value = ..., or the widget): the checker reads them"
        )
    needed = ("micro_batch_size", "accumulation_steps", "zero_grad", "divide_by_k")
    if not isinstance(answer, Explorer) or not set(needed) <= set(answer.controls):
        return "answer with the explorer of this lesson, al.accumulation.accumulation_explorer()"
    mb, k, zero, divide = (answer.values[name] for name in needed)
    # recomputed here from the controls' values, with the lesson's own model, data and function:
    # the answer's own `compute` is not trusted (one that ignores its controls would pass)
    try:
        model, data = _default_problem()
        expected = window_progress(model, data, mb, k, zero_grad=zero, divide_by_k=divide)
    except ValueError as err:
        return f"the explorer's controls do not describe one window of its 32 samples: {err}"
    shown = answer.data.get("accumulated") if isinstance(answer.data, dict) else None
    want = expected["accumulated"]
    same = (
        isinstance(shown, torch.Tensor)
        and answer.data.get("samples") == expected["samples"]
        and shown.shape == want.shape
        and shown.dtype == want.dtype
        and torch.allclose(shown, want, rtol=0, atol=1e-12)
    )
    if not same and _other_problem(answer.data, expected):
        return (
            "your explorer runs another model or other data than lesson 00's (its full-batch "
            "gradient differs), and the checker recomputes with the lesson's: build it with "
            "al.accumulation.accumulation_explorer() and no arguments, or on the lesson's "
            "small_net and samples unchanged, then set its controls"
        )
    if not same:
        return (
            "explorer.data is not what lesson 00's explorer computes at its controls' values: "
            "answer with the explorer of this lesson, its controls set (the widget or "
            "explorer.controls[name].value = ...), and let it compute"
        )
    every = zero == "every_micro_step"
    loop = "zeroing every iteration" if every else "zeroing once per window"
    seen = (
        f"your explorer covers {expected['samples']} samples in {len(want)} micro-batches, {loop}"
    )
    if expected["samples"] != 24 or len(want) != 3:
        return f"{seen}; the exercise asks for 24 samples in 3 micro-batches"
    if not every:
        return f"{seen}; the exercise asks for the loop that calls zero_grad() at the top of every iteration"
    return None


def _other_problem(shown, expected) -> bool:
    """True when the answer's data covers the window the controls ask for, yet its full-batch
    gradient is not the lesson's: the explorer was built on another model or data (or the
    lesson's model was changed), not left unset or written by hand."""
    if not isinstance(shown, dict) or shown.get("samples") != expected["samples"]:
        return False
    full, want = shown.get("full"), expected["full"]
    if not isinstance(full, torch.Tensor):
        return False
    same = full.shape == want.shape and full.dtype == want.dtype
    return not (same and torch.allclose(full, want, rtol=0, atol=1e-12))
