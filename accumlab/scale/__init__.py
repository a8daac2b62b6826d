"""Lesson 12: accumulation at scale — the dtype of the accumulator, pipeline micro-batches,
torch.compile, and when a bigger batch stops paying."""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        # accumulator.py: which dtype holds the running sum
        "ACCUMULATORS": "accumulator",
        "MainGrad": "accumulator",
        "accumulate": "accumulator",
        "accumulator_errors": "accumulator",
        "bf16_rounding": "accumulator",
        "available_accumulators": "accumulator",
        "grad_dtype_supported": "accumulator",
        # schedule.py, stages.py, pipeline.py: pipeline schedules are accumulation
        "SCHEDULES": "schedule",
        "bubble_curves": "schedule",
        "bubble_fraction": "schedule",
        "in_flight": "schedule",
        "replay": "schedule",
        "schedule_order": "schedule",
        "EXPERIMENTS": "stages",
        "pipeline_experiments": "pipeline",
        "weights_of": "pipeline",
        # recompiles.py: torch.compile under accumulation
        "FIXES": "recompiles",
        "CompileCounter": "recompiles",
        "compiled_accumulation": "recompiles",
        "zero_grad_recompiles": "recompiles",
        # noise.py, batch_sweep.py: when a bigger batch stops paying
        "Problem": "noise",
        "measure_b_simple": "noise",
        "noise_scale": "noise",
        "per_sample_grads": "noise",
        "batch_gradients": "batch_sweep",
        "batch_size_sweep": "batch_sweep",
        "fit": "batch_sweep",
        "tradeoff_curve": "batch_sweep",
        # plots.py and explorer.py
        "plot_accumulators": "plots",
        "plot_batch_sweep": "plots",
        "plot_bubble": "plots",
        "plot_recompiles": "plots",
        "plot_scale_explorer": "plots",
        "plot_schedules": "plots",
        "plot_step_weights": "plots",
        "update_scale_explorer": "plots",
        "explorer_data": "explorer",
        "scale_explorer": "explorer",
    },
)
