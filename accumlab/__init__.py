"""accumlab — the machinery behind the gradient-accumulation lessons. `import accumlab as al`.

Nothing runs at import time: call `al.setup()` in a lesson to seed and inspect the machine.
"""

from .audit import (
    CATALOGUE,
    AuditReport,
    Finding,
    audit,
    audit_explorer,
    audit_setup,
    catalogue_loop,
    plot_audit,
)
from .audit import CODES as AUDIT_CODES
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
from .graph import GraphView, draw_graph
from .losses import Loss, get_loss
from .memory import saved_tensor_bytes
from .models import ScalarModel, TinyLM, mlp
from .reference import accumulated_grads, accumulation_progress, full_batch_grads

__version__ = "0.1.0"

__all__ = [
    "AUDIT_CODES",
    "AuditReport",
    "CATALOGUE",
    "Finding",
    "audit",
    "audit_explorer",
    "audit_setup",
    "catalogue_loop",
    "plot_audit",
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
