"""Data-parallel gradient sync under accumulation on real processes (lesson 07).

`sync_experiments` launches one group of ranks and runs every experiment there; `launch` runs any
importable task with a hard timeout and full clean-up; `choose_plan` states the backend used.
"""

from .backend import Plan, choose_plan
from .launcher import DistError, WorkerFailed, WorkerTimeout, free_port, launch
from .lesson import PARTS, sync_experiments

__all__ = [
    "PARTS",
    "DistError",
    "Plan",
    "WorkerFailed",
    "WorkerTimeout",
    "choose_plan",
    "free_port",
    "launch",
    "sync_experiments",
]
