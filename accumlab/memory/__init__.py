"""Lesson 05: what training keeps in memory, what accumulation shrinks, step time against
micro-batch size, checkpointing, choosing k for a memory budget; its GPU recorder."""

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        # parts.py: bytes of each part of training memory, by tensor size
        "activation_bytes": "parts",
        "data_bytes": "parts",
        "grad_bytes": "parts",
        "memory_setup": "parts",
        "optimizer_state_bytes": "parts",
        "param_bytes": "parts",
        "proportional_deviation": "parts",
        "tensor_bytes": "parts",
        # peaks.py: measured peaks of real steps, and the footprint they are compared with
        "Footprint": "peaks",
        "footprint": "peaks",
        "memory_sweep": "peaks",
        "step_peak_bytes": "peaks",
        "step_transient_bytes": "peaks",
        # excess.py: what a real step holds beyond the named parts, measured apart
        "loss_storage": "excess",
        "step_phase_bytes": "excess",
        # leaks.py: loops that keep graphs alive
        "graph_nodes": "leaks",
        "logging_growth": "leaks",
        "peak_saved_bytes": "leaks",
        # throughput.py and checkpointing.py
        "checkpoint_comparison": "throughput",
        "step_time_sweep": "throughput",
        "step_times": "throughput",
        "time_step": "throughput",
        "Checkpointed": "checkpointing",
        "checkpoint_grad_gap": "checkpointing",
        "checkpointed": "checkpointing",
        # choose_k.py: a micro-batch size for a memory budget
        "Choice": "choose_k",
        "choose_micro_batch": "choose_k",
        "floor_bytes": "choose_k",
        # step.py: the lean training step the measurements run
        "memory_optimizer": "step",
        "train_step": "step",
        # plots.py, explorer.py, record.py
        "plot_checkpointing": "plots",
        "plot_footprint": "plots",
        "plot_logging_growth": "plots",
        "plot_memory_explorer": "explorer_plots",
        "plot_memory_vs_k": "plots",
        "moments": "plots",
        "plot_step_time": "plots",
        "update_memory_explorer": "explorer_plots",
        "explore_memory": "explorer",
        "memory_explorer": "explorer",
        "record_results": "record:record",
    },
)
