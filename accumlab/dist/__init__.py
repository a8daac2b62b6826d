"""Data-parallel gradient sync under accumulation on real processes (lesson 07).

`sync_experiments` launches one group of ranks and runs every experiment there; `launch` runs any
importable task with a hard timeout and full clean-up; `choose_plan` states the backend used.
Worker processes import their task from here (`accumlab.dist.lesson:lesson_task`).
"""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        "Plan": "backend",
        "choose_plan": "backend",
        "DistError": "launcher",
        "WorkerFailed": "launcher",
        "WorkerTimeout": "launcher",
        "free_port": "launcher",
        "launch": "launcher",
        "PARTS": "lesson",
        "sync_experiments": "lesson",
        "checks": "report",
        "format_summary": "report",
        "plot_fsdp_grad_memory": "plots",
        "plot_step_times": "plots",
        "plot_sync_explorer": "plots",
        "update_sync_explorer": "plots",
        "plot_sync_rounds": "plots",
        "plot_token_normalisation": "plots",
        "sweep_view": "explorer",
        "sync_explorer": "explorer",
        "record_results": "record:record",
    },
)
