"""Lessons 12 and 13: accumulation at scale — the dtype of the accumulator and pipeline
micro-batches (12); torch.compile, and when a bigger batch stops paying (13)."""

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
        "step_with_grad_dtype": "accumulator",
        # fused_wgrad.py: the weight gradient's own rounding, and the fused kernel that skips it
        "fused_wgrad_errors": "fused_wgrad",
        # master_weights.py: what the update needs besides the main gradient
        "master_weight_step": "master_weights",
        "update_rounding": "master_weights",
        "sharded_bytes": "master_weights",
        "SHARDED": "master_weights",
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
        # optimizer_compile.py: a compiled optimizer.step under accumulation
        "step_recompiles": "optimizer_compile",
        # noise.py, batch_sweep.py: when a bigger batch stops paying
        "Problem": "noise",
        "measure_b_simple": "noise",
        "noise_scale": "noise",
        "estimator_bias": "noise",
        "per_sample_grads": "noise",
        # two_batch.py: the noise scale read from an accumulation loop itself
        "two_batch_estimate": "two_batch",
        "NoiseScaleEMA": "two_batch",
        "AccumulationNoise": "two_batch",
        "linear_model": "two_batch",
        "micro_batch_windows": "two_batch",
        "two_batch_noise": "two_batch",
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
        # tradeoff_explorer.py, batch_plots.py: lesson 13's explorer
        "explore_batch": "tradeoff_explorer",
        "batch_explorer": "tradeoff_explorer",
        "plot_batch_explorer": "batch_plots",
        "update_batch_explorer": "batch_plots",
    },
)
