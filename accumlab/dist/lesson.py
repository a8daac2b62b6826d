"""Lesson 07's experiments in ONE launched group (process start-up is the expensive part), and the
single-process references they are checked against.

`sync_experiments(world_size=2)` launches the ranks, runs every part, and returns a plain dict (JSON
ready: counts, bytes, seconds, gradient differences) that the notebook, the recorder and
`python -m accumlab.dist` all use.
"""

from __future__ import annotations

import time
from dataclasses import asdict

import torch
import torch.nn.functional as F

from .. import _validate
from .._validate import one_of, positive_int
from ..compare import grad_diff
from ..data import regression_data
from ..models import TinyLM, mlp
from ..reference import full_batch_grads
from .backend import Plan, choose_plan
from .ddp import PITFALL_VARIANTS, SYNC_MODES, BranchNet, pitfall, sweep, sync_modes, uses_extra
from .fsdp import FSDP_VARIANTS, fsdp_accumulation
from .launcher import launch
from .shards import global_micro_step
from .tokens import TOKEN_VARIANTS, token_batch, token_normalisation

PARTS = ("ddp", "pitfall", "tokens", "fsdp", "sweep")
# the small models of each part; the worker and the reference must build the same ones
DDP_MODEL = {"features": 4, "hidden": 16}
PITFALL = {"k": 3, "micro_batch": 4, "features": 4, "hidden": 8, "lr": 0.5}
TOKENS = {"k": 2, "micro_batch": 2, "vocab": 16, "dim": 8}
FSDP_MODEL = {"features": 16, "hidden": 64, "depth": 2}
SWEEP = {"ks": (1, 2, 4, 8), "micro_batches": (8, 32), "repeats": 3}


def lesson_task(
    ctx, *, k: int, micro_batch: int, parts=PARTS, sweep_options=None, seed: int = 0
) -> dict:
    """Runs in every rank: the requested parts one after another on the same process group."""
    out, seconds = {}, {}
    runners = {
        "ddp": lambda: sync_modes(ctx, k=k, micro_batch=micro_batch, seed=seed, **DDP_MODEL),
        "pitfall": lambda: pitfall(ctx, seed=seed, **PITFALL),
        "tokens": lambda: token_normalisation(ctx, seed=seed, **TOKENS),
        "fsdp": lambda: fsdp_accumulation(
            ctx, k=k, micro_batch=micro_batch, seed=seed, **FSDP_MODEL
        ),
        "sweep": lambda: sweep(ctx, seed=seed, **(sweep_options or SWEEP)),
    }
    for part in parts:
        t0 = time.perf_counter()
        out[part] = runners[part]()
        seconds[part] = time.perf_counter() - t0
    out["seconds"] = seconds
    out["plan"] = ctx.plan.as_dict()  # under torchrun the ranks chose it together
    return out


def progress_steps(parts, world_size: int) -> int:
    """How many `ctx.step` calls rank 0 makes for `parts` (the progress bar's length)."""
    per = {
        "ddp": len(SYNC_MODES),
        "pitfall": len(PITFALL_VARIANTS),
        "tokens": 1,
        "fsdp": len(FSDP_VARIANTS),
        "sweep": world_size,
    }
    return sum(per[p] for p in parts)


def check_parts(parts) -> tuple[str, ...]:
    parts = tuple(_validate.sequence("parts", parts))
    for i, part in enumerate(parts):
        one_of(f"parts[{i}]", part, PARTS)
    return parts


# what `sweep_options` may set (ddp.sweep's keywords), and its bounds: each rank builds an MLP of
# features × hidden and times every (ranks, k, micro-batch) on it
SWEEP_SIZES = {"repeats": 100, "features": 4096, "hidden": 4096}
SWEEP_LISTS = {"ks": 1024, "micro_batches": 4096}


def check_sweep_options(options) -> dict | None:
    if options is None:
        return None
    options = _validate.mapping("sweep_options", options)
    for key, value in options.items():
        if key in SWEEP_LISTS:
            _validate.positive_ints(f"sweep_options[{key!r}]", value, maximum=SWEEP_LISTS[key])
        else:
            one_of("sweep_options keys", key, (*SWEEP_LISTS, *SWEEP_SIZES))
            positive_int(f"sweep_options[{key!r}]", value, maximum=SWEEP_SIZES[key])
    return options


def sync_experiments(
    world_size: int = 2,
    *,
    k: int = 4,
    micro_batch: int = 8,
    parts=PARTS,
    sweep_options: dict | None = None,
    timeout: float = 120.0,
    device: str = "auto",
    progress: bool = True,
    seed: int = 0,
) -> dict:
    """Launch `world_size` ranks once, run every part of lesson 07 there, compare with the
    single-process references, and return the summary (see `summarise`). Lesson 07."""
    positive_int("world_size", world_size)
    for name, value, most in (("k", k, 1024), ("micro_batch", micro_batch, 4096)):
        positive_int(name, value)
        if value > most:  # every rank builds world_size × k × micro_batch samples
            raise ValueError(f"{name} must be at most {most}, got {value}")
    parts = check_parts(parts)
    sweep_options = check_sweep_options(sweep_options)
    _validate.seed("seed", seed)
    _validate.flag("progress", progress)
    plan = choose_plan(world_size, device=device)
    config = {
        "k": k,
        "micro_batch": micro_batch,
        "parts": parts,
        "seed": seed,
        "sweep_options": sweep_options,
    }
    raw = launch(
        "accumlab.dist.lesson:lesson_task",
        world_size,
        kwargs=config,
        timeout=timeout,
        plan=plan,
        progress_total=progress_steps(parts, world_size) if progress else None,
        desc=f"lesson 07 on {world_size} ranks",
    )
    return summarise(raw, plan, k=k, micro_batch=micro_batch, seed=seed)


def _rank_spread(per_rank: list[dict]) -> float:
    """Largest |difference| between any rank's tensors and rank 0's (0.0 for identical replicas)."""
    first = per_rank[0]
    return max(
        (float((r[n] - first[n]).abs().max()) for r in per_rank[1:] for n in first), default=0.0
    )


def _diff(a: dict, b: dict) -> dict:
    return asdict(grad_diff(a, b))


def summarise(raw: list[dict], plan: Plan, *, k: int, micro_batch: int, seed: int = 0) -> dict:
    """Turn every rank's raw result into counts, bytes, times and comparisons (JSON-ready). The
    plan the ranks report (chosen together under torchrun) wins over `plan`."""
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
    first = raw[0]
    if "ddp" in first:
        ref = ddp_reference(world, k, micro_batch, seed)
        out["ddp_param_bytes"] = sum(t.numel() * t.element_size() for t in ref.values())
        out["ddp_buckets"] = first["ddp"]["buckets"]
        out["ddp"] = {}
        for mode in SYNC_MODES:
            r0 = first["ddp"][mode]
            out["ddp"][mode] = {
                "allreduce_calls": r0["calls"],
                "allreduce_bytes": r0["bytes"],
                "per_backward": r0["per_backward"],
                "rank_max_abs_diff": _rank_spread([r["ddp"][mode]["grads"] for r in raw]),
                "vs_reference": _diff(r0["grads"], ref),
            }
    if "pitfall" in first:
        p = PITFALL
        ref = branch_reference(world, p["k"], p["micro_batch"], p["features"], p["hidden"], seed)
        out["pitfall"] = {
            "k": p["k"],
            "used_extra": [uses_extra(i) for i in range(p["k"])],
            "variants": list(PITFALL_VARIANTS),
        }
        for v in PITFALL_VARIANTS:
            r0 = first["pitfall"][v]
            out["pitfall"][v] = {
                "allreduce_calls": r0["calls"],
                "per_backward": r0["per_backward"],
                "param_max_abs_diff_ranks": _rank_spread([r["pitfall"][v]["params"] for r in raw]),
                "grad_max_abs_diff_ranks": _rank_spread([r["pitfall"][v]["grads"] for r in raw]),
                "vs_reference": _diff(r0["grads"], ref),
                "extra_vs_reference": _diff(
                    {n: g for n, g in r0["grads"].items() if n.startswith("extra")},
                    {n: g for n, g in ref.items() if n.startswith("extra")},
                ),
            }
    if "tokens" in first:
        t = TOKENS
        ref = token_reference(world, t["k"], t["micro_batch"], t["vocab"], t["dim"], seed)
        out["tokens"] = {
            "tokens_per_rank": [r["tokens"]["local_tokens"] for r in raw],
            "global_tokens": first["tokens"]["global_tokens"],
        }
        for v in TOKEN_VARIANTS:
            out["tokens"][v] = {
                "rank_max_abs_diff": _rank_spread([r["tokens"][v]["grads"] for r in raw]),
                "vs_reference": _diff(first["tokens"][v]["grads"], ref),
            }
    if "fsdp" in first:
        out["fsdp"] = summarise_fsdp(raw, fsdp_reference(world, k, micro_batch, seed), k)
    if "sweep" in first:
        out["sweep"] = first["sweep"]
    out["seconds_per_part"] = first["seconds"]
    return out


def summarise_fsdp(raw: list[dict], ref: dict, k: int) -> dict:
    """FSDP2's counts and bytes per variant. Bytes read from internals that this torch lacks stay
    None (never 0), with the reason in `internals_error`."""
    first = raw[0]["fsdp"]
    out = {
        "param_bytes_full": first[FSDP_VARIANTS[0]]["param_bytes_full"],
        "variants": list(FSDP_VARIANTS),
    }
    errors = {h["error"] for r in raw for v in FSDP_VARIANTS for h in r["fsdp"][v]["grad_bytes"]}
    out["internals_error"] = next((e for e in errors if e), None)
    out["accumulation_dtypes"] = first["accumulation_dtypes"]

    def worst(v, i, key):  # the largest over ranks, after micro-step i; None if any is unknown
        values = [r["fsdp"][v]["grad_bytes"][i][key] for r in raw]
        return None if any(x is None for x in values) else max(values)

    for v in FSDP_VARIANTS:
        r0 = first[v]
        held = [worst(v, i, "total") for i in range(k)]
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
            "peak_grad_bytes": None if None in held else max(held),
            "seconds": max(r["fsdp"][v]["seconds"] for r in raw),
            "rank_max_abs_diff": _rank_spread([r["fsdp"][v]["grads"] for r in raw]),
            "vs_reference": _diff(r0["grads"], ref),
        }
    return out


# --- single-process references: the same samples, one process, no communication ---------------


def ddp_reference(world_size: int, k: int, micro_batch: int, seed: int = 0) -> dict:
    """Gradient of the mean loss over the global batch (ranks × micro-batch × k samples)."""
    f, h = DDP_MODEL["features"], DDP_MODEL["hidden"]
    data = regression_data(n=world_size * k * micro_batch, features=f, seed=seed)
    return full_batch_grads(mlp(f, h, seed=seed), data)


def fsdp_reference(world_size: int, k: int, micro_batch: int, seed: int = 0) -> dict:
    m = FSDP_MODEL
    data = regression_data(n=world_size * k * micro_batch, features=m["features"], seed=seed)
    return full_batch_grads(mlp(m["features"], m["hidden"], depth=m["depth"], seed=seed), data)


def token_reference(
    world_size: int, k: int, micro_batch: int, vocab: int, dim: int, seed: int = 0
) -> dict:
    """Every real token of every rank weighs the same: sum of token losses / all tokens."""
    data = token_batch(world_size, k, micro_batch, vocab=vocab, seed=seed)
    return full_batch_grads(TinyLM(vocab, dim, seed=seed), data, loss="cross_entropy")


def branch_reference(
    world_size: int, k: int, micro_batch: int, features: int, hidden: int, seed: int = 0
) -> dict:
    """One process replaying the pitfall's window: micro-step i of all ranks at once, the branch
    used exactly when the ranks used it, each micro-step weighing 1/k."""
    from ..engine import grads_of

    data = regression_data(n=world_size * k * micro_batch, features=features, seed=seed)
    model = BranchNet(features, hidden, seed=seed)
    for i in range(k):
        mb = global_micro_step(data, world_size, i, micro_batch)
        (F.mse_loss(model(mb.x, uses_extra(i)), mb.y) / k).backward()
    return grads_of(model)
