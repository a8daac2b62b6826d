"""Lesson 01: the autograd graph a forward builds and a backward consumes.

The graph helpers every lesson uses (`al.draw_graph`, `al.count_nodes`, `al.saved_tensor_bytes`)
are core; this topic holds lesson 01's experiment on summing losses before one backward.
"""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        "graph_growth_explorer": "explorer",
        "plot_graph_growth": "plots",
        "summed_loss_graph": "summed",
    },
)
