"""accumlab — the machinery behind the gradient-accumulation lessons. `import accumlab as al`.

The core — data, models, losses, the engine (`Recipe`, `run`, `Trace`), reference gradients,
comparisons, autograd-graph helpers, setup, figures and the explorer base — is reached as `al.<name>`.
Each lesson's machinery lives in a topic folder reached as `al.<topic>.<name>`:

    accumulation (00, 02)  autograd (01)     scaling (03)     batchnorm (04)  memory (05)
    precision (06)         dist (07)         audit (08)       coupling (09)   bookkeeping (10)
    frameworks (11)        scale (12)

Nothing runs at import time, and nothing is imported before a lesson touches it: call
`al.setup()` in a lesson to seed and inspect the machine.
"""

from ._lazy import lazy_names

__version__ = "0.1.0"

TOPICS = (
    "accumulation",
    "autograd",
    "scaling",
    "batchnorm",
    "memory",
    "precision",
    "dist",
    "audit",
    "coupling",
    "bookkeeping",
    "frameworks",
    "scale",
)

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        # env.py: setup
        "Env": "env",
        "setup": "env",
        # data.py, models.py, losses.py
        "IGNORE_INDEX": "data",
        "Data": "data",
        "classic_data": "data",
        "classification_data": "data",
        "regression_data": "data",
        "token_data": "data",
        "NORMS": "models",
        "ScalarModel": "models",
        "TinyLM": "models",
        "mlp": "models",
        "Loss": "losses",
        "get_loss": "losses",
        # optim.py, engine.py: how a loop accumulates
        "OPTIMIZERS": "optim",
        "make_optimizer": "optim",
        "CLIP_PLACEMENTS": "engine",
        "LAST_WINDOW_POLICIES": "engine",
        "NORMALIZATIONS": "engine",
        "SCHEDULER_STEPS": "engine",
        "ZERO_GRAD_PLACEMENTS": "engine",
        "Event": "engine",
        "Recipe": "engine",
        "Trace": "engine",
        "grads_of": "engine",
        "params_of": "engine",
        "run": "engine",
        # reference.py, compare.py: what a loop should have produced, and how far it is
        "accumulated_grads": "reference",
        "accumulation_progress": "reference",
        "full_batch_grads": "reference",
        "GradDiff": "compare",
        "flatten": "compare",
        "grad_diff": "compare",
        # graph.py, saved.py: the autograd graph and what it keeps
        "GraphView": "graph",
        "count_nodes": "graph",
        "draw_graph": "graph",
        "saved_tensor_bytes": "saved",
        # figures.py, explorer.py, recorded.py, exercises
        "plot_bars": "figures",
        "Explorer": "explorer",
        "describe_recorded": "recorded:describe",
        "load_recorded": "recorded:load",
        "check": "exercises",
    },
    TOPICS,
)
