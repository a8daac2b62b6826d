"""Lesson 09: when accumulation is NOT the big batch — losses and state that couple samples:
in-batch negatives (GradCache), EMA state, load-balancing losses, per-sample clipping, the
optimizer fused into backward, RL loss aggregation."""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        # principle.py: the test any batch loss can take
        "accumulation_gap": "principle",
        "batch_loss_grads": "principle",
        "mse_loss": "principle",
        "naive_accumulated_grads": "principle",
        # contrastive.py, gradcache.py: in-batch negatives
        "TEMPERATURE": "contrastive",
        "chance_loss": "contrastive",
        "contrastive_loss": "contrastive",
        "contrastive_sweep": "contrastive",
        "encoder": "contrastive",
        "info_nce": "contrastive",
        "logit_scale_of": "contrastive",
        "pair_data": "contrastive",
        "pair_inputs": "contrastive",
        "cached_negatives_grads": "gradcache",
        "encoder_saved_bytes": "gradcache",
        "gradcache_grads": "gradcache",
        "logit_scale_ratio": "gradcache",
        "same_masks_reference": "gradcache",
        "TEMPERATURE_LOOPS": "learned_scale",
        "temperature_training": "learned_scale",
        # ema.py: state updated on every forward
        "EMA_PLACEMENTS": "ema",
        "accelerate_ema_updates": "ema",
        "ema_horizon": "ema",
        "ema_old_weight": "ema",
        "ema_run": "ema",
        "ema_runs": "ema",
        # router.py: a loss of batch statistics
        "AUX_MODES": "router",
        "ORDERS": "router",
        "aux_loss_grads": "router",
        "aux_loss_sweep": "router",
        "term_errors": "router",
        "load_balance_loss": "router",
        "routed_fractions": "router",
        "router_model": "router",
        "router_data": "router",
        # dpsgd.py: per-sample clipping
        "CLIP_MODES": "dpsgd",
        "clip_fraction": "dpsgd",
        "clipped_grads": "dpsgd",
        "median_grad_norm": "dpsgd",
        "per_sample_grads": "dpsgd",
        # in_backward.py: the optimizer fused into backward
        "HOOK_GATES": "in_backward",
        "accumulate_then_step": "in_backward",
        "update_length": "in_backward",
        "fused_optimizer_window": "in_backward",
        # aggregation.py: RL-style loss aggregation
        "AGGREGATIONS": "aggregation",
        "aggregated_grads": "aggregation",
        "partition_gaps": "aggregation",
        "policy": "aggregation",
        "rl_batch": "aggregation",
        "token_losses": "aggregation",
        # gaps.py, plots.py, explorer.py
        "COUPLINGS": "gaps",
        "coupling_gaps": "gaps",
        "coupling_caption": "plots",
        "plot_contrastive_sweep": "plots",
        "plot_coupling_explorer": "plots",
        "plot_ema": "plots",
        "plot_gap_sweep": "plots",
        "plot_gaps": "plots",
        "plot_aux_sweep": "plots",
        "plot_partition_gaps": "plots",
        "update_coupling_figure": "plots",
        "coupling_explorer": "explorer",
        "explore_coupling": "explorer",
    },
)
