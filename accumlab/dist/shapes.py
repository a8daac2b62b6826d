"""What lesson 07's results look like, so its report, plots and explorer can say what is wrong
with a dict they are handed (a hand-built or partial one) instead of failing with a KeyError."""

from __future__ import annotations

from .._validate import nonempty, result

_MAXREL = {"max_rel": float}
_REF = {"vs_reference": _MAXREL}
# a collective counted per backward, and the result checked across ranks and against one process
_COUNTED = {
    "per_backward": nonempty([int]),
    "allreduce_calls": int,
    "rank_max_abs_diff": float,
    **{"vs_reference": _MAXREL},
}
_MODE = {"per_backward": nonempty([int]), "allreduce_calls": int, "allreduce_bytes": int}
_PITFALL = {
    "allreduce_calls": int,
    "per_backward": [int],
    "param_max_abs_diff_ranks": float,
    **_REF,
}
_FSDP = {
    "reduce_scatter_calls": int,
    "reduce_scatter_bytes": int,
    "reduce_scatter_per_backward": [int],
    "all_gather_calls": int,
    "collectives_counted": bool,
    "grad_bytes_per_micro_step": nonempty([(int, type(None))]),
    "held_grad_bytes": (int, type(None)),
    "seconds": float,
    **_REF,
}
PLAN = {"backend": str, "ddp_device_type": str, "fsdp_device_type": str, "world_size": int}
ROW = {
    "ranks": int,
    "k": int,
    "micro_batch": int,
    "no_sync": bool,
    "allreduce_calls": int,
    "allreduce_bytes": int,
    "step_time_s": float,
    "allreduce_alone_s": float,
}
SUMMARY = {
    "backend_note": str,
    "torch": str,
    "world_size": int,
    "k": int,
    "micro_batch": int,
    "global_batch": int,
}
# the parts a summary holds only when they were run
PARTS = {
    "ddp": {
        m: {**_MODE, **_REF, "rank_max_abs_diff": float}
        for m in ("every", "no_sync", "require_flag", "backward_only")
    },
    "ddp_buckets": {
        "grad_bytes": int,
        "n_params": int,
        "k": int,
        "device": str,
        "window": {
            **{
                f"view_{v}_set_to_none_{n}": nonempty([int])
                for v in ("false", "true")
                for n in ("true", "false")
            },
            **{f"view_{v}_sync_each": nonempty([int]) for v in ("false", "true")},
        },
        "window_peak": {
            **{
                f"view_{v}_set_to_none_{n}": nonempty([int])
                for v in ("false", "true")
                for n in ("true", "false")
            },
            **{f"view_{v}_sync_each": nonempty([int]) for v in ("false", "true")},
        },
        "gradient_as_bucket_view": {
            v: {"after_wrap": int, "after_backward": int} for v in ("false", "true")
        },
    },
    "pitfall": {
        "used_extra": list,
        **{v: _PITFALL for v in ("no_sync_find_unused", "sync_every", "manual_allreduce")},
    },
    "tokens": {"tokens_per_rank": list, "local_mean": _REF, "global_count": _REF},
    "fsdp": {"param_bytes_full": int, "sync_each": _FSDP, "sync_last": _FSDP},
    "sweep": [ROW],
    "uneven": {
        "k": int,
        "micro_batches": nonempty([int]),
        "wait_s": float,
        "plain": {
            "finished": nonempty([bool]),
            "allreduce_calls": nonempty([int]),
            "seconds": [float],
            "error": (str, type(None)),
        },
        "join": {
            "allreduce_calls": nonempty([int]),
            "rank0_last_window_vs_local_over_world": _MAXREL,
            "forwards": nonempty([int]),
            "other_allreduce_calls": nonempty([int]),
            "other_allreduce_per_forward": [int],
            "rank0_last_window_over_local": {
                v: float
                for v in ("hook_initial", "hook_remaining", "no_hook_initial", "no_hook_remaining")
            },
            "rank0_last_window_off_proportional": float,
            "throw": {
                "raised": nonempty([(str, type(None))]),
                "other_allreduce_per_forward": [int],
            },
        },
    },
    "clipping": {
        "ddp": {
            "before_last": nonempty([float]),
            "after_sync": nonempty([float]),
            "reference_norm": float,
            "after_sync_vs_reference": float,
        },
        "fsdp": {
            "before_last": nonempty([float]),
            "grads_before_last": [int],
            "shard_norms": nonempty([float]),
            "after_sync": nonempty([float]),
            "reference_norm": float,
            "after_sync_vs_reference": float,
            "shards_combined_vs_reference": float,
            "clip_to": float,
            "clipped_vs_reference": _MAXREL,
        },
    },
    "hsdp": (
        {"skipped": str},
        {v: _COUNTED for v in ("sync_each", "all_reduce_last", "sync_last")},
    ),
    "accelerate": (
        {"skipped": str},
        {"version": str, **{f"sync_each_batch_{v}": _COUNTED for v in ("false", "true")}},
    ),
}
# what `checks` reads of each part (a summary cut down to them still gets checked)
_FSDP_CHECKED = {
    "reduce_scatter_calls": int,
    "reduce_scatter_bytes": int,
    "reduce_scatter_per_backward": [int],
    "collectives_counted": bool,
    **_REF,
}
CHECKED = {
    "ddp": {
        m: {
            "per_backward": nonempty([int]),
            "allreduce_bytes": int,
            "rank_max_abs_diff": float,
            **_REF,
        }
        for m in ("every", "no_sync", "require_flag", "backward_only")
    },
    "ddp_buckets": PARTS["ddp_buckets"],
    "pitfall": {
        v: {"param_max_abs_diff_ranks": float, **_REF} for v in ("sync_every", "manual_allreduce")
    },
    "tokens": {"global_count": _REF},
    "fsdp": {"sync_each": _FSDP_CHECKED, "sync_last": _FSDP_CHECKED},
    "uneven": PARTS["uneven"],
    "clipping": PARTS["clipping"],
    "hsdp": PARTS["hsdp"],
    "accelerate": PARTS["accelerate"],
}
TOKENS = PARTS["tokens"]
FSDP = {
    "param_bytes_full": int,
    "sync_each": {"grad_bytes_per_micro_step": nonempty([int]), "reduce_scatter_bytes": int},
    "sync_last": {"grad_bytes_per_micro_step": nonempty([int]), "reduce_scatter_bytes": int},
}
_SERIES = {
    "k": nonempty([int]),
    "allreduce_calls": [int],
    "allreduce_bytes": [int],
    "bytes_between_ranks": [int],
    "step_time_s": [float],
    "allreduce_time_s": [float],
}
VIEW = {
    "ranks": int,
    "micro_batch": int,
    "selected": ROW,
    "series": {False: _SERIES, True: _SERIES},
    "noise_s": float,
}
SYNC = "al.dist.sync_experiments(...)"


def summary(name: str, value, *, complete: bool = True) -> dict:
    """A summary with every part it holds complete; `complete=False` asks only for the counts
    the checks read (k, and the world size with FSDP2)."""
    result(name, value, dict, f"what {SYNC} returns")
    base = SUMMARY if complete else {"k": int, **({"world_size": int} if "fsdp" in value else {})}
    parts = PARTS if complete else CHECKED
    schema = {**base, **{p: s for p, s in parts.items() if p in value}}
    return result(name, value, schema, f"what {SYNC} returns")


def rows(name: str, value) -> list:
    return result(name, value, nonempty([ROW]), f"the 'sweep' rows of what {SYNC} returns")


def rows_at(name: str, value, **setting) -> list:
    """Sweep rows, and a (ranks, micro_batch, ...) setting they measured."""
    rows(name, value)
    for key, wanted in setting.items():
        measured = sorted({r[key] for r in value})
        if wanted not in measured:
            raise ValueError(f"{key} must be one of the measured values {measured}, got {wanted!r}")
    return value


def ddp(name: str, value) -> dict:
    what = f"the 'ddp' part of what {SYNC} returns"
    return result(
        name, value, {str: {"per_backward": nonempty([int]), "allreduce_calls": int}}, what
    )


def fsdp(name: str, value) -> dict:
    return result(name, value, FSDP, f"the 'fsdp' part of what {SYNC} returns")


def tokens(name: str, value) -> dict:
    return result(name, value, TOKENS, f"the 'tokens' part of what {SYNC} returns")


def view(name: str, value) -> dict:
    return result(name, value, VIEW, "what al.dist.sweep_view(...) returns")
