"""accumlab — the machinery behind the gradient-accumulation lessons. `import accumlab as al`.

Nothing runs at import time: call `al.setup()` in a lesson to seed and inspect the machine.
"""

from .compare import GradDiff, grad_diff
from .data import IGNORE_INDEX, Data, classic_data, classification_data, regression_data, token_data
from .engine import (
    LAST_WINDOW_POLICIES,
    NORMALIZATIONS,
    ZERO_GRAD_PLACEMENTS,
    Event,
    Recipe,
    Trace,
    grads_of,
    params_of,
    run,
)
from .env import Env, setup
from .exercises import check
from .graph import GraphView, count_nodes, draw_graph, summed_loss_graph
from .losses import Loss, get_loss
from .memory import saved_tensor_bytes
from .models import ScalarModel, TinyLM, mlp
from .plots_scaling import (
    plot_linear_scaling_gap,
    plot_sample_weights,
    plot_scaling_explorer,
    plot_token_weights,
    plot_window_errors,
)
from .reference import accumulated_grads, accumulation_progress, full_batch_grads
from .scaling import (
    Weights,
    WindowCheck,
    effective_batch_size,
    effective_weights,
    epoch_grads,
    linear_scaled_lr,
    linear_scaling_gap,
    logged_losses,
    mean_loss,
    sample_weights,
    scale_grads,
    update_of,
    weighted_grads,
    window_errors,
)
from .tokens import combined_loss, per_token, rank_slices, simulated_ranks_grads, token_weights
from .widgets_scaling import loss_scaling_data, loss_scaling_explorer

__version__ = "0.1.0"

__all__ = [
    "IGNORE_INDEX",
    "LAST_WINDOW_POLICIES",
    "NORMALIZATIONS",
    "ZERO_GRAD_PLACEMENTS",
    "Data",
    "Env",
    "Event",
    "GradDiff",
    "GraphView",
    "Loss",
    "Recipe",
    "ScalarModel",
    "TinyLM",
    "Trace",
    "accumulated_grads",
    "accumulation_progress",
    "check",
    "classic_data",
    "count_nodes",
    "classification_data",
    "draw_graph",
    "full_batch_grads",
    "get_loss",
    "grad_diff",
    "grads_of",
    "mlp",
    "params_of",
    "regression_data",
    "run",
    "saved_tensor_bytes",
    "setup",
    "summed_loss_graph",
    "token_data",
    # lesson 03: loss scaling
    "Weights",
    "WindowCheck",
    "combined_loss",
    "effective_batch_size",
    "effective_weights",
    "epoch_grads",
    "linear_scaled_lr",
    "linear_scaling_gap",
    "logged_losses",
    "loss_scaling_data",
    "loss_scaling_explorer",
    "mean_loss",
    "per_token",
    "plot_linear_scaling_gap",
    "plot_sample_weights",
    "plot_scaling_explorer",
    "plot_token_weights",
    "plot_window_errors",
    "rank_slices",
    "sample_weights",
    "scale_grads",
    "simulated_ranks_grads",
    "token_weights",
    "update_of",
    "weighted_grads",
    "window_errors",
]
