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
    runs = r0["variants"]
    ratio = {v: _ratio(runs[v]["grads"], r0["local_grads"]) for v in runs if v != "throw"}
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
                "forwards": [r["join"]["forwards"] for r in raw],
                # torch.distributed.all_reduce calls besides the hook's bucket all-reduces
                "other_allreduce_calls": [r["join"]["other_allreduce_calls"] for r in raw],
                "other_allreduce_per_forward": r0["other_allreduce_per_forward"],
                # rank 0's last-window gradient over its local one, per way of dividing
                "rank0_last_window_over_local": {v: x for v, (x, _) in ratio.items()},
                "rank0_last_window_off_proportional": max(off for _, off in ratio.values()),
                "throw": {
                    "raised": [r["join"]["variants"]["throw"]["raised"] for r in raw],
                    "other_allreduce_per_forward": runs["throw"]["other_allreduce_per_forward"],
                },
            },
        }
    }


def _ratio(grads: dict, local: dict) -> tuple[float, float]:
    """(c, off): the c for which `grads` is closest to c·`local`, and how far it is from that
    (largest relative difference): c says what a gradient was divided by, off that it is one."""
    g, ref = flatten(grads), flatten(local)
    c = float(g @ ref / (ref @ ref))
    return c, grad_diff(grads, {n: c * t for n, t in local.items()}).max_rel


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
    from .report import copies, rounding

    b = raw[0]
    g, n, block = b["grad_bytes"], b["n_params"], rounding(b)
    return {
        "ddp_buckets": {
            **b,
            "copies": {
                v: {when: copies(x, g, n, block) for when, x in r.items()}
                for v, r in b["gradient_as_bucket_view"].items()
            },
            "window_copies": {
                key: [copies(x, g, n, block) for x in xs] for key, xs in b["window"].items()
            },
            # the most held at once in each window, in copies of the gradients (not a whole
            # number: a backward holds new gradients beside the old ones for a moment)
            "window_peak_copies": {
                key: [x / g for x in xs] for key, xs in b["window_peak"].items()
            },
        }
    }


def _fsdp(raw, world, k, micro_batch, seed) -> dict:
    from .fsdp_summary import summarise_fsdp  # it reads this module's helpers

    return {"fsdp": summarise_fsdp(raw, fsdp_reference(world, k, micro_batch, seed), k)}


def _sweep(raw, world, k, micro_batch, seed) -> dict:
    return {"sweep": raw[0]}  # rank 0 timed the rows


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
