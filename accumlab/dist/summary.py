"""Lesson 07's results, one part at a time: every rank's raw result turned into counts, bytes,
times and comparisons with single-process references (plain, JSON-ready data).

`summarise(raw, plan, k=..., micro_batch=...)` takes the ranks' results of `lesson_task` (any subset
of the parts) and returns the summary the notebook, the recorder, `python -m accumlab.dist` and
`al.dist.checks` read. Each reference replays exactly the samples the ranks saw, in one process,
with no communication.
"""

from __future__ import annotations

from dataclasses import asdict

import torch

from ..compare import flatten, grad_diff
from .backend import Plan
from .ddp import PITFALL_VARIANTS, uses_extra
from .fsdp import FSDP_VARIANTS
from .hsdp import HSDP_VARIANTS
from .references import (
    PITFALL,
    TOKENS,
    UNEVEN,
    branch_reference,
    ddp_reference,
    fsdp_reference,
    token_reference,
)
from .tokens import TOKEN_VARIANTS


def _rank_spread(per_rank: list[dict]) -> float:
    """Largest |difference| between any rank's tensors and rank 0's (0.0 for identical replicas)."""
    first = per_rank[0]
    return max(
        (float((r[n] - first[n]).abs().max()) for r in per_rank[1:] for n in first), default=0.0
    )


def _diff(a: dict, b: dict) -> dict:
    return asdict(grad_diff(a, b))


def summarise(raw: list[dict], plan: Plan, *, k: int, micro_batch: int, seed: int = 0) -> dict:
    """Turn every rank's raw result into counts, bytes, times and comparisons (JSON-ready), for
    the parts the ranks ran. The plan the ranks report (chosen together under torchrun) wins."""
    world = len(raw)
    plan = Plan(**raw[0]["plan"]) if "plan" in raw[0] else plan
    out = {
        "plan": plan.as_dict(),
        "backend_note": str(plan),
        "torch": torch.__version__,
        "world_size": world,
        "k": k,
        "micro_batch": micro_batch,
        "global_batch": world * k * micro_batch,
    }
    for part, summarise_part in PARTS.items():
        if part in raw[0]:
            out.update(summarise_part([r[part] for r in raw], world, k, micro_batch, seed))
    out["seconds_per_part"] = raw[0]["seconds"]
    return out


def _ddp(raw, world, k, micro_batch, seed) -> dict:
    ref = ddp_reference(world, k, micro_batch, seed)
    out = {"ddp_param_bytes": sum(t.numel() * t.element_size() for t in ref.values()), "ddp": {}}
    for mode in raw[0]:
        r0 = raw[0][mode]
        out["ddp"][mode] = {
            "allreduce_calls": r0["calls"],
            "allreduce_bytes": r0["bytes"],
            "per_backward": r0["per_backward"],
            "rank_max_abs_diff": _rank_spread([r[mode]["grads"] for r in raw]),
            "vs_reference": _diff(r0["grads"], ref),
        }
    return out


def _pitfall(raw, world, k, micro_batch, seed) -> dict:
    p = PITFALL
    ref = branch_reference(world, p["k"], p["micro_batch"], p["features"], p["hidden"], seed)
    out = {
        "k": p["k"],
        "used_extra": [uses_extra(i) for i in range(p["k"])],
        "variants": list(PITFALL_VARIANTS),
    }
    for v in PITFALL_VARIANTS:
        r0 = raw[0][v]
        out[v] = {
            "allreduce_calls": r0["calls"],
            "per_backward": r0["per_backward"],
            "param_max_abs_diff_ranks": _rank_spread([r[v]["params"] for r in raw]),
            "grad_max_abs_diff_ranks": _rank_spread([r[v]["grads"] for r in raw]),
            "vs_reference": _diff(r0["grads"], ref),
        }
    return {"pitfall": out}


def _tokens(raw, world, k, micro_batch, seed) -> dict:
    t = TOKENS
    ref = token_reference(world, t["k"], t["micro_batch"], t["vocab"], t["dim"], seed)
    out = {
        "tokens_per_rank": [r["local_tokens"] for r in raw],
        "global_tokens": raw[0]["global_tokens"],
    }
    for v in TOKEN_VARIANTS:
        out[v] = {
            "rank_max_abs_diff": _rank_spread([r[v]["grads"] for r in raw]),
            "vs_reference": _diff(raw[0][v]["grads"], ref),
        }
    return {"tokens": out}


def _uneven(raw, world, k, micro_batch, seed) -> dict:
    u, plain = UNEVEN, [r["plain"] for r in raw]
    r0 = raw[0]["join"]
    local = {n: g / world for n, g in r0["local_grads"].items()}  # zeros from the other ranks
    return {
        "uneven": {
            "k": u["k"],
            "micro_batches": [r["micro_batches"] for r in raw],
            "wait_s": u["wait"],
            "plain": {
                "finished": [p["finished"] for p in plain],
                "allreduce_calls": [p["allreduce_calls"] for p in plain],
                "seconds": [p["seconds"] for p in plain],
                "error": plain[0]["error"],
            },
            "join": {
                "allreduce_calls": [r["join"]["allreduce_calls"] for r in raw],
                "rank0_last_window_vs_local_over_world": _diff(r0["grads"], local),
            },
        }
    }


def _norm(grads: dict) -> float:
    return float(flatten(grads).norm())


def _off(values, reference: float) -> float:
    """The largest relative distance of `values` from `reference`."""
    return max(abs(v - reference) / reference for v in values)


def _clipping(raw, world, k, micro_batch, seed) -> dict:
    ddp, fsdp = [r["ddp"] for r in raw], [r["fsdp"] for r in raw]
    fsdp_ref = fsdp_reference(world, k, micro_batch, seed)
    clip_to = fsdp[0]["clip_to"]
    ddp_norm, fsdp_norm = _norm(ddp_reference(world, k, micro_batch, seed)), _norm(fsdp_ref)
    shards = [f["shard_norm"] for f in fsdp]
    return {
        "clipping": {
            "ddp": {
                "before_last": [d["before_last"] for d in ddp],
                "after_sync": [d["after_sync"] for d in ddp],
                "reference_norm": ddp_norm,
                "after_sync_vs_reference": _off([d["after_sync"] for d in ddp], ddp_norm),
            },
            "fsdp": {
                "before_last": [f["before_last"] for f in fsdp],
                "grads_before_last": [f["grads_before_last"] for f in fsdp],
                "shard_norms": shards,
                "after_sync": [f["after_sync"] for f in fsdp],
                "reference_norm": fsdp_norm,
                "after_sync_vs_reference": _off([f["after_sync"] for f in fsdp], fsdp_norm),
                # the shards' norms combine as a sum of squares into the whole gradient's
                "shards_combined_vs_reference": _off(
                    [sum(n * n for n in shards) ** 0.5], fsdp_norm
                ),
                "clip_to": clip_to,
                "clipped_vs_reference": _diff(
                    fsdp[0]["clipped_grads"], {n: g * clip_to for n, g in fsdp_ref.items()}
                ),
            },
        }
    }


def _hsdp(raw, world, k, micro_batch, seed) -> dict:
    if "skipped" in raw[0]:
        return {"hsdp": {"skipped": raw[0]["skipped"]}}
    ref = fsdp_reference(world, k, micro_batch, seed)
    out = {"mesh": raw[0]["mesh"], "variants": list(HSDP_VARIANTS)}
    for v in HSDP_VARIANTS:
        r0 = raw[0][v]
        out[v] = {
            "allreduce_calls": r0["calls"],
            "allreduce_bytes": r0["bytes"],
            "per_backward": r0["per_backward"],
            "rank_max_abs_diff": _rank_spread([r[v]["grads"] for r in raw]),
            "vs_reference": _diff(r0["grads"], ref),
        }
    return {"hsdp": out}


def _accelerate(raw, world, k, micro_batch, seed) -> dict:
    if "skipped" in raw[0]:
        return {"accelerate": {"skipped": raw[0]["skipped"]}}
    ref = ddp_reference(world, k, micro_batch, seed)
    out = {"version": raw[0]["version"]}
    for v in ("false", "true"):
        r0 = raw[0][v]
        out[f"sync_each_batch_{v}"] = {
            "allreduce_calls": r0["calls"],
            "allreduce_bytes": r0["bytes"],
            "per_backward": r0["per_backward"],
            "wrapped_in": r0["wrapped_in"],
            "device": r0["device"],
            "rank_max_abs_diff": _rank_spread([r[v]["grads"] for r in raw]),
            "vs_reference": _diff(r0["grads"], ref),
        }
    return {"accelerate": out}


def _buckets(raw, world, k, micro_batch, seed) -> dict:
    """Rank 0's bytes, and the same in whole copies of the gradients (None: not a whole number)."""
    from .report import copies

    b = raw[0]
    g, n = b["grad_bytes"], b["n_params"]
    return {
        "ddp_buckets": {
            **b,
            "copies": {
                v: {when: copies(x, g, n) for when, x in r.items()}
                for v, r in b["gradient_as_bucket_view"].items()
            },
            "window_copies": {
                key: [copies(x, g, n) for x in xs] for key, xs in b["window"].items()
            },
        }
    }


def _fsdp(raw, world, k, micro_batch, seed) -> dict:
    return {"fsdp": summarise_fsdp(raw, fsdp_reference(world, k, micro_batch, seed), k)}


def _sweep(raw, world, k, micro_batch, seed) -> dict:
    return {"sweep": raw[0]}  # rank 0 timed the rows


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


# summary of each part (`lesson_task`'s keys), in the order a full run reports them
PARTS = {
    "ddp": _ddp,
    "buckets": _buckets,
    "sweep": _sweep,
    "pitfall": _pitfall,
    "tokens": _tokens,
    "uneven": _uneven,
    "clipping": _clipping,
    "fsdp": _fsdp,
    "hsdp": _hsdp,
    "accelerate": _accelerate,
}
