"""Lesson 10: bookkeeping under accumulation — what to log, what a "step" is, epoch boundaries,
the learning-rate schedule's length, exact resume and what each missing piece of a checkpoint
costs, and the effective batch in samples and tokens."""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        # logs.py: what to log, on which axis
        "AXES": "logs",
        "LOGGED": "logs",
        "logged_curves": "logs",
        "logging_runs": "logs",
        "micro_step_axis": "logs",
        "mixed_axis_log": "logs",
        # counters.py: what a step is, epoch boundaries, the schedule's length
        "COUNTERS": "counters",
        "POSITION_RULES": "counters",
        "Schedule": "counters",
        "linear_warmup": "counters",
        "position_from_step": "counters",
        "scheduler_total_steps": "counters",
        "step_schedule": "counters",
        "warmup_lrs": "counters",
        # loop.py: a loop that can stop anywhere
        "Run": "loop",
        "Setup": "loop",
        "train": "loop",
        # checkpoints.py: checkpoints, exact resume, the damage of each omission
        "OMISSIONS": "checkpoints",
        "ResumeCheck": "checkpoints",
        "final_error": "checkpoints",
        "load_aliasing": "checkpoints",
        "load_checkpoint": "checkpoints",
        "read_counts": "checkpoints",
        "resume": "checkpoints",
        "resume_damage": "checkpoints",
        "save_checkpoint": "checkpoints",
        # practice.py: what stock tools do, measured with the tools
        "RNG_RESTORES": "practice",
        "accelerate_sync_points": "practice",
        "cpu_description": "practice",
        "dropout_masks_split_alike": "practice",
        "stock_loader_resume": "practice",
        # world_size.py: resuming on another number of ranks
        "window_grads": "world_size",
        "window_samples": "world_size",
        # scaler.py: fp16's skipped steps against the step count and the schedule
        "skipped_step_counts": "scaler",
        # tokens.py: the effective batch in samples and tokens
        "TokenBudget": "tokens",
        "tokens_per_step": "tokens",
        # plots.py and explorer.py
        "explorer_summary": "plots",
        "plot_bookkeeping_explorer": "plots",
        "update_bookkeeping_explorer": "plots",
        "plot_log_ratio": "plots",
        "plot_logged_losses": "plots",
        "plot_lr_schedules": "plots",
        "plot_resume_damage": "plots",
        "plot_schedules": "plots",
        "plot_tokens_per_step": "plots",
        "bookkeeping_data": "explorer",
        "bookkeeping_explorer": "explorer",
        "explorer_setup": "explorer",
    },
)
