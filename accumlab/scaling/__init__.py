"""Lesson 03: what each sample weighs in the gradient — loss division per optimizer, last windows,
token counts (also across ranks), what the token normalisation does to training, what to log.
Also used by lesson 13: gradient variance under accumulation, the effective batch and the linear
learning-rate rule."""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        # weights.py: per-sample weights and per-window checks
        "Weights": "weights",
        "WindowCheck": "weights",
        "effective_batch_size": "weights",
        "effective_weights": "weights",
        "epoch_grads": "weights",
        "item_loss_sums": "weights",
        "linear_scaled_lr": "weights",
        "linear_scaling_gap": "weights",
        "logged_losses": "weights",
        "mean_loss": "weights",
        "sample_weights": "weights",
        "scale_grads": "weights",
        "update_of": "weights",
        "weighted_grads": "weights",
        "window_errors": "weights",
        # division.py: forgetting loss / k per optimizer, the loop that steps on (i + 1) % k, multiples
        "DECAY_OPTIMIZERS": "division",
        "CANDIDATES": "division",
        "forgotten_division": "division",
        "Multiple": "division",
        "multiple_of": "division",
        "step_every_kth": "division",
        "with_params": "division",
        # variance.py: accumulation does not lower variance below the batch it emulates
        "gradient_variance": "variance",
        # tokens.py: per-token weights, simulated data-parallel ranks
        "TOKEN_COUNTS": "tokens",
        "combined_loss": "tokens",
        "per_token": "tokens",
        "rank_slices": "tokens",
        "simulated_ranks_grads": "tokens",
        "token_weights": "tokens",
        # training.py: the same model trained under each normalisation; unpadded sequences
        "TRAINING_WAYS": "training",
        "token_training": "training",
        "unpadded": "training",
        # plots.py and explorer.py
        "plot_linear_scaling_gap": "plots",
        "plot_sample_weights": "plots",
        "plot_scaling_explorer": "plots",
        "plot_token_training": "plots",
        "plot_token_weights": "plots",
        "plot_window_errors": "plots",
        "update_scaling_explorer": "plots",
        "MAX_SPREAD": "explorer",
        "loss_scaling_data": "explorer",
        "loss_scaling_explorer": "explorer",
    },
)
