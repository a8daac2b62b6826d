"""Lesson 06: mixed precision with GradScaler, accumulation dtype, clipping, schedulers and Adam's
state under accumulation; its GPU recorder."""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        # amp.py: autocast + GradScaler orders; amp_runs.py: the experiments built on it
        "AMP_ORDERS": "amp",
        "SKIP_CONVENTIONS": "amp",
        "AmpTrace": "amp",
        "amp_train": "amp",
        "autocast_dtype": "amp",
        "cpu_grad_scaler_supported": "amp",
        "default_loss_scale": "amp",
        "accelerate_on_skip": "amp_runs",
        "amp_demo": "amp_runs",
        "amp_error": "amp_runs",
        "amp_report": "amp_runs",
        "FLOAT16_SEED_SWEEP": "amp_runs",
        "float16_skip_counts": "amp_runs",
        "float16_skips": "amp_runs",
        "fused_with_scaler": "amp_runs",
        "trainer_skip_check": "fused",
        "lightning_frequency": "lightning_skip",
        "lightning_on_skip": "lightning_skip",
        "skip_conventions": "amp_runs",
        # dtypes.py: the dtype gradients accumulate in
        "ACCUMULATIONS": "dtypes",
        "accumulate": "dtypes",
        "accumulation_errors": "dtypes",
        "grad_dtypes": "dtypes",
        "micro_batch_grads": "dtypes",
        # clipping.py, schedules.py, adam.py
        "clip_weights": "clipping",
        "clipped_updates": "clipping",
        "clipping_seeds": "clipping",
        "clipping_sweep": "clipping",
        "update_norm": "clipping",
        "REAL_SCHEDULERS": "schedules",
        "real_schedules": "schedules",
        "schedule_curves": "schedules",
        "warmup_cosine": "schedules",
        "adam_comparison": "adam",
        "adam_steps": "adam",
        "max_param_gap": "adam",
        # plots.py, explorer.py, record.py
        "plot_explorer": "plots",
        "update_explorer": "plots",
        "plot_precision": "plots",
        "plot_real_schedules": "plots",
        "plot_scales": "plots",
        "plot_schedules": "plots",
        "plot_skip_conventions": "plots",
        "plot_update_norms": "plots",
        "amp_explorer": "explorer",
        "explorer_data": "explorer",
        "record_results": "record:record",
    },
)
