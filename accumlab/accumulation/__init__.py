"""Lessons 00 and 02: `.grad` after each micro-batch of a window, for correct and buggy loops,
against the full-batch gradient; how long the buggy loop's last-micro-batch gradient is.

`al.accumulation.accumulation_explorer()` is the widget both lessons show.
"""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        "accumulation_explorer": "explorer",
        "last_only_lengths": "last_only",
        "last_only_survey": "last_only",
        "plot_window_progress": "plots",
        "update_window_progress": "plots",
        "value_names": "progress",
        "window_progress": "progress",
    },
)
