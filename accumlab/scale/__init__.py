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
    },
)
