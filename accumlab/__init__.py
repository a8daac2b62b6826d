"""accumlab — the machinery behind the gradient-accumulation lessons. `import accumlab as al`.

Nothing runs at import time: call `al.setup()` in a lesson to seed and inspect the machine.
"""

from .checkpointing import Checkpointed, checkpoint_grad_gap
from .choose_k import Choice, choose_micro_batch, floor_bytes
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
from .footprint import (
    Footprint,
    activation_bytes,
    footprint,
    memory_setup,
    memory_sweep,
    optimizer_state_bytes,
    proportional_deviation,
)
from .graph import GraphView, draw_graph
from .leaks import graph_nodes, logging_growth, peak_saved_bytes
from .losses import Loss, get_loss
from .memory import saved_tensor_bytes
from .models import ScalarModel, TinyLM, mlp
from .reference import accumulated_grads, accumulation_progress, full_batch_grads
from .throughput import checkpoint_comparison, step_time_sweep, time_step
from .widgets_memory import explore_memory, memory_explorer

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
    "Checkpointed",
    "Choice",
    "Footprint",
    "activation_bytes",
    "checkpoint_comparison",
    "checkpoint_grad_gap",
    "choose_micro_batch",
    "explore_memory",
    "floor_bytes",
    "footprint",
    "graph_nodes",
    "logging_growth",
    "memory_explorer",
    "memory_setup",
    "memory_sweep",
    "optimizer_state_bytes",
    "peak_saved_bytes",
    "proportional_deviation",
    "step_time_sweep",
    "time_step",
]
