"""Lesson 01: the autograd graph a forward builds and a backward consumes.

The graph helpers every lesson uses (`al.draw_graph`, `al.count_nodes`, `al.saved_tensor_bytes`)
are core; this topic holds lesson 01's experiments: what one node saves, what backward releases,
summing losses before one backward, and forwards that save more than activations.
"""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        "graph_growth_explorer": "explorer",
        "graph_growth_caption": "plots",
        "plot_graph_growth": "plots",
        "update_graph_growth": "plots",
        "saved_bytes_around_backward": "saved",
        "saved_tensors_of": "saved",
        "graph_growth": "summed",
        "summed_loss_graph": "summed",
        "weight_normed": "forwards",
    },
)
