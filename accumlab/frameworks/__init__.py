"""Lesson 11: what the frameworks do for you — Accelerate, Lightning, the Transformers Trainer and
DeepSpeed run side by side against the reference (a labelled stand-in where DeepSpeed is missing).

The frameworks themselves are imported only inside the functions that run them: `import accumlab`
and `al.frameworks` stay cheap.
"""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        # problem.py: the two problems and their windows
        "DATASETS": "problem",
        "Problem": "problem",
        "make_problem": "problem",
        # runs.py: the frameworks and variants, one run, all runs, versions
        "ALL": "runs",
        "FRAMEWORKS": "runs",
        "VARIANTS": "runs",
        "lr_factor": "runs",
        "run_all": "runs",
        "run_framework": "runs",
        "run_loop": "runs",
        "versions": "runs",
        # hooks.py, measure.py: what a run recorded, and each step against the reference
        "FrameworkRun": "hooks",
        "StepCheck": "measure",
        "check_run": "measure",
        "final_weight_error": "measure",
        # table.py
        "FrameworkTable": "table",
        "framework_table": "table",
        # the runners, for a learner who wants to read or reuse one
        "StandInEngine": "deepspeed_stand_in",
        "deepspeed_batch_triple": "with_deepspeed",
        "default_max_grad_norm": "with_trainer",
        "trainer_defaults": "with_trainer",
        "accelerate_state_is_empty": "process_state",
        "trainer_loop": "with_trainer",
        "offline_and_quiet": "quiet",
        # plots.py and explorer.py
        "plot_step_errors": "plots",
        "plot_step_explorer": "plots",
        "update_step_explorer": "plots",
        "explore_frameworks": "explorer",
        "framework_explorer": "explorer",
        "framework_grid": "explorer",
    },
)
