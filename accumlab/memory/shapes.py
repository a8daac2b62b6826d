"""What lesson 05's results look like, so its plots can say what is wrong with a dict they are
handed (a hand-built or partial one) instead of failing inside with a KeyError."""

from __future__ import annotations

from .._validate import nonempty, result

FOOTPRINT = {
    "params": int,
    "grads": int,
    "optimizer_state": int,
    "step_transient": int,
    "data": int,
    "activations": int,
    "accumulation_steps": int,
}
SWEEP = {
    "global_batch": int,
    "micro_sizes": nonempty([int]),
    "accumulation_steps": nonempty([int]),
    "activations": [int],
    "data": [int],
    "peak": [(int, type(None))],
    "floor": int,
    "parts": {"parameters": int, "optimizer state": int, "gradients": int},
    "optimizer": str,
    "device": str,
}
TIMING = {
    "global_batch": int,
    "micro_sizes": nonempty([int]),
    "accumulation_steps": [int],
    "seconds": [float],
    "device": str,
}
COMPARISON = {
    "global_batch": int,
    "resting": int,
    "rows": nonempty([{"name": str, "activations": int, "peak": int, "seconds": float}]),
    "device": str,
}
GROWTH = {str: {"micro_steps": nonempty([int]), "graph_nodes": [int], "alive_bytes": [int]}}
EXPLORER = {
    "micro_batch_size": int,
    "accumulation_steps": int,
    "global_batch": int,
    "optimizer": str,
    "checkpointing": bool,
    "footprint": FOOTPRINT,
    "full_batch": FOOTPRINT,
    "seconds": float,
    "full_seconds": float,
    "seconds_range": [float],
    "full_seconds_range": [float],
}


def footprint(name: str, value) -> dict:
    """A `Footprint` or its `as_dict()`, as a dict."""
    as_dict = value.as_dict() if callable(getattr(value, "as_dict", None)) else value
    return result(
        name, as_dict, FOOTPRINT, "what al.memory.footprint(...) returns (or its .as_dict())"
    )


def footprints(name: str, value) -> dict:
    """{label: Footprint or its as_dict()}, at least one."""
    result(name, value, {str: object}, "a dict from labels to results of al.memory.footprint(...)")
    return {label: footprint(f"{name}[{label!r}]", fp) for label, fp in value.items()}


def sweep(name: str, value) -> dict:
    return result(name, value, SWEEP, "what al.memory.memory_sweep(...) returns")


def timing(name: str, value) -> dict:
    return result(name, value, TIMING, "what al.memory.step_time_sweep(...) returns")


def comparison(name: str, value) -> dict:
    return result(name, value, COMPARISON, "what al.memory.checkpoint_comparison(...) returns")


def growth(name: str, value) -> dict:
    return result(
        name, value, GROWTH, "a dict from labels to results of al.memory.logging_growth(...)"
    )


def explorer(name: str, value) -> dict:
    return result(name, value, EXPLORER, "what al.memory.explore_memory(...) returns")
