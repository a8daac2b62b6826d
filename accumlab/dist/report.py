"""Plain-text report of a lesson-07 summary, and the checks it must pass (lesson 07)."""

from __future__ import annotations

from .shapes import summary as summary_shape

TOLERANCE = 1e-9  # float64 throughout: agreement to ~1e-15 is expected, 1e-9 leaves room for order


def checks(summary: dict) -> dict[str, bool]:
    """Each relation the lesson claims, evaluated on `summary` (True = holds)."""
    summary_shape("summary", summary, complete=False)
    out = {}
    k = summary["k"]
    if "ddp" in summary:
        d = summary["ddp"]
        every = d["every"]["per_backward"]
        out["DDP syncs every micro-step without no_sync (k rounds)"] = (
            len(every) == k and min(every) >= 1
        )
        out["no_sync: one round per optimizer step, on the last micro-step"] = [
            n > 0 for n in d["no_sync"]["per_backward"]
        ] == [False] * (k - 1) + [True]
        out["require_backward_grad_sync: same rounds as no_sync"] = (
            d["require_flag"]["per_backward"] == d["no_sync"]["per_backward"]
        )
        out["no_sync around backward only still syncs every micro-step"] = all(
            n >= 1 for n in d["backward_only"]["per_backward"]
        )
        out["no_sync sends 1/k of the bytes"] = (
            d["no_sync"]["allreduce_bytes"] * k == d["every"]["allreduce_bytes"]
        )
        out["all sync modes: every rank holds the single-process gradient"] = all(
            m["vs_reference"]["max_rel"] < TOLERANCE and m["rank_max_abs_diff"] <= TOLERANCE * 1e-3
            for m in d.values()
        )
    if "ddp_buckets" in summary:
        b = summary["ddp_buckets"]
        g, view = b["grad_bytes"], b["gradient_as_bucket_view"]
        out["DDP buckets: a second copy of the gradients, unless gradient_as_bucket_view"] = (
            view["false"]["after_backward"] >= 2 * g > view["true"]["after_backward"] >= g
        )
    if "tokens" in summary:
        t = summary["tokens"]
        out["tokens: all-reduced count matches the single-process reference"] = (
            t["global_count"]["vs_reference"]["max_rel"] < TOLERANCE
        )
    if "pitfall" in summary:
        p = summary["pitfall"]
        out["pitfall: the safe patterns keep replicas identical and correct"] = all(
            p[v]["param_max_abs_diff_ranks"] == 0.0 and p[v]["vs_reference"]["max_rel"] < TOLERANCE
            for v in ("sync_every", "manual_allreduce")
        )
    if "fsdp" in summary:
        out.update(fsdp_checks(summary["fsdp"], k, summary["world_size"]))
    return out


def fsdp_checks(f: dict, k: int, world: int) -> dict[str, bool]:
    """FSDP2's relations. A count that could not be made is a FAILED check, never a pass."""
    variants = f.get("variants", ["sync_each", "sync_last"])
    out = {
        "FSDP2: every variant matches the single-process gradient": all(
            f[v]["vs_reference"]["max_rel"] < TOLERANCE for v in variants
        ),
        "FSDP2: collectives counted (FSDP2 internals present)": all(
            f[v]["collectives_counted"] for v in variants
        ),
        "FSDP2: unsharded bytes read (FSDP2 internals present)": not f.get("internals_error"),
    }
    if not out["FSDP2: collectives counted (FSDP2 internals present)"]:
        return out
    each, last = f["sync_each"], f["sync_last"]
    if world == 1:  # one rank holds everything: FSDP2 has nothing to reduce-scatter or gather
        out["FSDP2 at world size 1: no reduce-scatter at all (nothing to shard)"] = all(
            f[v]["reduce_scatter_calls"] == 0 for v in variants
        )
        return out
    out["FSDP2: reduce-scatter after every backward by default"] = (
        len(each["reduce_scatter_per_backward"]) == k
        and min(each["reduce_scatter_per_backward"]) > 0
    )
    out["FSDP2: reduce-scatter only on the last micro-step without sync"] = [
        n > 0 for n in last["reduce_scatter_per_backward"]
    ] == [False] * (k - 1) + [True]
    out["FSDP2: syncing every micro-step sends k times the reduce-scatter bytes"] = (
        last["reduce_scatter_bytes"] > 0
        and each["reduce_scatter_bytes"] == k * last["reduce_scatter_bytes"]
    )
    if "accumulation_dtypes" in f:
        d = f["accumulation_dtypes"]
        out["FSDP2: bfloat16 parameters accumulate in bfloat16 unless reduce_dtype=float32"] = (
            d.get("None") == ["bfloat16"] and d.get("float32") == ["float32"]
        )
    if "sync_last_keep" in f:
        keep = f["sync_last_keep"]
        out["FSDP2: keeping parameters unsharded saves all-gathers"] = (
            keep["all_gather_calls"] < last["all_gather_calls"]
        )
    return out


def _mb(n) -> str:
    return f"{n / 2**20:.3f} MiB" if n >= 2**16 else f"{n} B"


def format_summary(summary: dict) -> str:
    """What `python -m accumlab.dist` prints: backend, counts, bytes, times, equivalence checks."""
    summary_shape("summary", summary)
    lines = [f"backend: {summary['backend_note']}", f"torch {summary['torch']}"]
    k, m, w = summary["k"], summary["micro_batch"], summary["world_size"]
    if "ddp" in summary:
        lines.append(
            f"\nDDP: {k} micro-steps of {m} samples on {w} rank(s) (global batch {summary['global_batch']})"
        )
        for mode, r in summary["ddp"].items():
            lines.append(
                f"  {mode:<14} all-reduce calls {r['allreduce_calls']:>2} per backward {r['per_backward']}, "
                f"{_mb(r['allreduce_bytes'])}; max rel. diff to one process "
                f"{r['vs_reference']['max_rel']:.1e}"
            )
    if "ddp_buckets" in summary:
        b = summary["ddp_buckets"]
        lines.append(
            f"\nDDP gradient memory (gradients: {_mb(b['grad_bytes'])}), measured after one backward:"
        )
        for view, r in b["gradient_as_bucket_view"].items():
            lines.append(
                f"  gradient_as_bucket_view={view:<5} buckets {_mb(r['after_wrap'])}, "
                f"buckets + .grad {_mb(r['after_backward'])}"
            )
    if "pitfall" in summary:
        p = summary["pitfall"]
        lines.append(
            f"\nfind_unused_parameters pitfall (branch used on micro-steps {p['used_extra']}):"
        )
        for v in p.get("variants", ("no_sync_find_unused", "sync_every", "manual_allreduce")):
            r = p[v]
            lines.append(
                f"  {v:<20} all-reduce calls {r['allreduce_calls']} (per backward {r['per_backward']}), "
                f"param spread across ranks "
                f"{r['param_max_abs_diff_ranks']:.1e}, max rel. diff to one process "
                f"{r['vs_reference']['max_rel']:.1e}"
            )
    if "tokens" in summary:
        t = summary["tokens"]
        lines.append(f"\ntoken normalisation: real tokens per rank {t['tokens_per_rank']}")
        for v in ("local_mean", "global_count"):
            lines.append(
                f"  {v:<13} max rel. diff to one process {t[v]['vs_reference']['max_rel']:.1e}"
            )
    if "fsdp" in summary:
        f = summary["fsdp"]
        lines.append(f"\nFSDP2 fully_shard ({_mb(f['param_bytes_full'])} of parameters):")
        if f.get("internals_error"):
            lines.append(f"  NOT MEASURED: {f['internals_error']}")
        if summary["world_size"] == 1:
            lines.append("  (world size 1: FSDP2 shards nothing, so it skips every reduce-scatter)")
        for v in f.get("variants", ("sync_each", "sync_last")):
            r = f[v]
            peak = "?" if r["peak_grad_bytes"] is None else _mb(r["peak_grad_bytes"])
            counted = "" if r["collectives_counted"] else " (NOT COUNTED: internals missing)"
            lines.append(
                f"  {v:<14} reduce-scatter calls {r['reduce_scatter_calls']:>2} "
                f"({_mb(r['reduce_scatter_bytes'])}), all-gathers {r['all_gather_calls']:>2}{counted}, "
                f"peak gradient memory per rank {peak}, {r['seconds'] * 1e3:.1f} ms, "
                f"max rel. diff to one process {r['vs_reference']['max_rel']:.1e}"
            )
    if "sweep" in summary and summary["sweep"]:
        lines.append("\nstep time (median), all-reduce per optimizer step:")
        lines.append("  ranks   k  micro  no_sync  calls       bytes   ms/step")
        for r in summary["sweep"]:
            lines.append(
                f"  {r['ranks']:>5} {r['k']:>3} {r['micro_batch']:>6} {str(r['no_sync']):>8} "
                f"{r['allreduce_calls']:>6} {r['allreduce_bytes']:>11} {r['step_time_s'] * 1e3:>9.2f}"
            )
    result = checks(summary)
    lines.append("\nchecks:")
    lines += [f"  [{'ok' if ok else 'FAILED'}] {name}" for name, ok in result.items()]
    return "\n".join(lines)
