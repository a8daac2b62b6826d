"""Lesson 04: BatchNorm under micro-batching — statistics per micro-batch, the gradient mismatch,
running-statistic decay, what it does to training, the remedies, and dropout."""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        # layers.py: the lesson's models and data, the one-sample check
        "batchnorm_data": "layers",
        "batchnorm_layers": "layers",
        "check_micro_batches": "layers",
        "norm_model": "layers",
        "refusal": "layers",
        # stats.py: statistics and the gradient mismatch
        "batch_gradient_diff": "stats",
        "gradient_mismatch": "stats",
        "micro_batch_stats": "stats",
        "norm_inputs": "stats",
        # measured.py: the statistics read back from the layer itself
        "layer_statistics": "measured",
        "normalized_values": "measured",
        # running.py: running statistics
        "matching_momentum": "running",
        "micro_batch_weights": "running",
        "old_weight_formula": "running",
        "running_mean_trajectory": "running",
        "running_stats_step": "running",
        "with_momentum": "running",
        # remedies.py
        "GhostBatchNorm1d": "remedies",
        "freeze_batchnorm": "remedies",
        "ghost_batchnorm": "remedies",
        "sync_batchnorm_sweep": "remedies",
        # recalibration.py: torch.optim.swa_utils.update_bn
        "recalibrate": "recalibration",
        # repeats.py: the training comparison over several data draws
        "accuracy_over_draws": "repeats",
        # coupling.py: exact when each micro-step runs the same forward and no sample sees another
        "ReplayedDropout": "coupling",
        "TinyGRU": "coupling",
        "replayed_dropout_diff": "coupling",
        "sequence_data": "coupling",
        "truncated_bptt_diff": "coupling",
        # training.py: effect on training, dropout
        "accuracy": "training",
        "accuracy_over_seeds": "training",
        "dropout_expectation": "training",
        "training_comparison": "training",
        # plots.py and explorer.py
        "plot_batchnorm_explorer": "plots",
        "plot_dropout_expectation": "plots",
        "plot_gradient_mismatch": "plots",
        "plot_micro_batch_stats": "plots",
        "plot_old_weight": "plots",
        "plot_running_trajectory": "plots",
        "plot_training": "plots",
        "update_batchnorm_explorer": "plots",
        "batchnorm_explorer": "explorer",
        "explore_batchnorm": "explorer",
    },
)
