"""Lessons 00 and 02: accumulated against full-batch gradients, as micro-batches are added.

`al.accumulation.accumulation_explorer()` is the widget both lessons show.
"""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        "accumulation_explorer": "explorer",
        "plot_accumulation_progress": "plots",
    },
)
