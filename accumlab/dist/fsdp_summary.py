"""Lesson 07's FSDP2 results across ranks: counts, bytes and comparisons per variant (plain,
JSON-ready data; `accumlab.dist.summary` calls it for the "fsdp" part)."""

from __future__ import annotations

from .fsdp import FSDP_VARIANTS
from .summary import _diff, _rank_spread


def summarise_fsdp(raw: list[dict], ref: dict, k: int) -> dict:
    """FSDP2's counts and bytes per variant. Bytes read from internals that this torch lacks stay
    None (never 0), with the reason in `internals_error`."""
    first = raw[0]
    out = {
        "param_bytes_full": first[FSDP_VARIANTS[0]]["param_bytes_full"],
        "param_shapes": first[FSDP_VARIANTS[0]]["param_shapes"],
        "unit_bytes": first[FSDP_VARIANTS[0]]["unit_bytes"],
        "shard_bytes_expected": first[FSDP_VARIANTS[0]]["shard_bytes_expected"],
        "variants": list(FSDP_VARIANTS),
    }
    errors = {h["error"] for r in raw for v in FSDP_VARIANTS for h in r[v]["grad_bytes"]}
    out["internals_error"] = next((e for e in errors if e), None)
    out["accumulation_dtypes"] = first["accumulation_dtypes"]
    out["reduce_ops"] = sorted({op for r in raw for op in r["reduce_ops"]})
    out["default_mesh"] = first["default_mesh"]

    def worst(v, i, key):  # the largest over ranks, after micro-step i; None if any is unknown
        values = [r[v]["grad_bytes"][i][key] for r in raw]
        return None if any(x is None for x in values) else max(values)

    for v in FSDP_VARIANTS:
        r0 = first[v]
        held = [worst(v, i, "total") for i in range(k)]
        extra = [max(r[v]["backward_extra_bytes"][i] for r in raw) for i in range(k)]
        out[v] = {
            "reduce_scatter_calls": r0["reduce_scatter"]["calls"],
            "reduce_scatter_bytes": r0["reduce_scatter"]["bytes"],
            "reduce_scatter_per_backward": r0["reduce_scatter"]["per_backward"],
            "all_gather_calls": r0["all_gather"]["calls"],
            "all_gather_bytes": r0["all_gather"]["bytes"],
            "all_gather_per_micro_step": r0["all_gather"]["per_backward"],
            "collectives_counted": r0["counted"],
            "grad_bytes_per_micro_step": held,
            "sharded_bytes_per_micro_step": [r0["grad_bytes"][i]["sharded"] for i in range(k)],
            "unsharded_bytes_per_micro_step": [r0["grad_bytes"][i]["unsharded"] for i in range(k)],
            "unsharded_param_bytes_per_micro_step": [
                worst(v, i, "unsharded_params") for i in range(k)
            ],
            "held_grad_bytes": None if None in held else max(held),
            # each rank's most held between micro-steps (storages: padding rows included)
            "held_grad_bytes_per_rank": [
                None
                if any(h["total"] is None for h in r[v]["grad_bytes"])
                else max(h["total"] for h in r[v]["grad_bytes"])
                for r in raw
            ],
            # the least any rank held in gradient storages at its reduce-scatter, per micro-step
            "grad_bytes_at_reduce_scatter": [
                min(r[v]["grad_bytes_at_reduce_scatter"][i] for r in raw) for i in range(k)
            ],
            # the most allocated during each backward above its start (all ranks' largest), and
            # held gradient + that: what a micro-step really needs at its high point
            "backward_extra_bytes_per_micro_step": extra,
            "backward_peak_bytes": None
            if None in held
            else max(([0] + held[:-1])[i] + extra[i] for i in range(k)),
            "seconds": max(r[v]["seconds"] for r in raw),
            "rank_max_abs_diff": _rank_spread([r[v]["grads"] for r in raw]),
            "vs_reference": _diff(r0["grads"], ref),
        }
    return out
