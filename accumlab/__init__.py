"""accumlab — the machinery behind the gradient-accumulation lessons. `import accumlab as al`.

Nothing runs at import time: call `al.setup()` in a lesson to seed and inspect the machine.
"""

from .amp import (
    AMP_ORDERS,
    AmpTrace,
    amp_demo,
    amp_error,
    amp_report,
    amp_train,
    autocast_dtype,
    cpu_grad_scaler_supported,
    default_loss_scale,
)
from .clipping import clipped_updates, update_norm
from .compare import GradDiff, grad_diff
from .data import IGNORE_INDEX, Data, classic_data, classification_data, regression_data, token_data
from .engine import (
    CLIP_PLACEMENTS,
    LAST_WINDOW_POLICIES,
    NORMALIZATIONS,
    SCHEDULER_STEPS,
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
from .optimizer_state import adam_comparison, adam_steps, max_param_gap
from .precision import ACCUMULATIONS, accumulate, accumulation_errors, micro_batch_grads
from .reference import accumulated_grads, accumulation_progress, full_batch_grads
from .schedules import schedule_curves, warmup_cosine
from .widgets_amp import amp_explorer, explorer_data

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
    "ACCUMULATIONS",
    "AMP_ORDERS",
    "AmpTrace",
    "CLIP_PLACEMENTS",
    "SCHEDULER_STEPS",
    "accumulate",
    "accumulation_errors",
    "adam_comparison",
    "adam_steps",
    "amp_demo",
    "amp_error",
    "amp_explorer",
    "amp_report",
    "amp_train",
    "autocast_dtype",
    "clipped_updates",
    "cpu_grad_scaler_supported",
    "default_loss_scale",
    "explorer_data",
    "max_param_gap",
    "micro_batch_grads",
    "schedule_curves",
    "update_norm",
    "warmup_cosine",
]
