"""Lessons 00 and 02: `.grad` after each micro-batch of a window, for correct and buggy loops,
against the full-batch gradient; how long the buggy loop's last-micro-batch gradient is.

`al.accumulation.accumulation_explorer()` is the widget both lessons show;
`accelerate_zero_grad_placements` runs lesson 02's Accelerate loop on the real package.
"""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        "ACCELERATE_PLACEMENTS": "accelerate_idiom",
        "accelerate_zero_grad_placements": "accelerate_idiom",
        "accumulation_explorer": "explorer",
        "drawn_window_progress": "plots",
        "last_only_lengths": "last_only",
        "last_only_survey": "last_only",
        "plot_window_progress": "plots",
        "update_window_progress": "plots",
        "value_names": "progress",
        "window_progress": "progress",
    },
)
