"""Data-parallel gradient sync under accumulation on real processes (lesson 07).

`SyncLab` keeps one group of ranks up and runs one experiment at a time (the lesson runs each
after its prediction); `sync_experiments` runs them all at once; `launch` runs any importable task
on fresh ranks, and `Ranks` on ranks that stay up, both with a hard timeout and full clean-up;
`choose_plan` states the backend used. Worker processes import their task from here
(`accumlab.dist.lesson:lesson_task`).
"""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        "Plan": "backend",
        "choose_plan": "backend",
        "DistError": "supervise",
        "WorkerFailed": "supervise",
        "WorkerTimeout": "supervise",
        "free_port": "launcher",
        "launch": "launcher",
        "Ranks": "ranks",
        "PARTS": "lesson",
        "SyncLab": "lesson",
        "sync_experiments": "lesson",
        "sampler_split": "uneven",
        "bucket_caps": "buckets",
        "checks": "report",
        "format_summary": "text",
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
