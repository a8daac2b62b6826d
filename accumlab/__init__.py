"""accumlab — the machinery behind the gradient-accumulation lessons. `import accumlab as al`.

Nothing runs at import time: call `al.setup()` in a lesson to seed and inspect the machine.
"""

from . import dist
from .compare import GradDiff, grad_diff
from .data import IGNORE_INDEX, Data, classic_data, classification_data, regression_data, token_data
from .dist import (
    DistError,
    Plan,
    WorkerFailed,
    WorkerTimeout,
    choose_plan,
    launch,
    sync_experiments,
)
from .dist.report import checks as sync_checks
from .dist.report import format_summary as format_sync_report
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
from .graph import GraphView, draw_graph
from .losses import Loss, get_loss
from .memory import saved_tensor_bytes
from .models import ScalarModel, TinyLM, mlp
from .plots_dist import (
    plot_fsdp_grad_memory,
    plot_step_times,
    plot_sync_explorer,
    plot_sync_rounds,
    plot_token_normalisation,
)
from .reference import accumulated_grads, accumulation_progress, full_batch_grads
from .widgets_dist import sweep_view, sync_explorer

__version__ = "0.1.0"

__all__ = [
    "dist",
    "sync_explorer",
    "sweep_view",
    "plot_token_normalisation",
    "plot_sync_rounds",
    "plot_sync_explorer",
    "plot_step_times",
    "plot_fsdp_grad_memory",
    "format_sync_report",
    "sync_checks",
    "sync_experiments",
    "launch",
    "choose_plan",
    "WorkerTimeout",
    "WorkerFailed",
    "Plan",
    "DistError",
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
    "token_data",
]
