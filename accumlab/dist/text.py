"""What `python -m accumlab.dist` prints: lesson 07's summary as plain text (lesson 07)."""

from __future__ import annotations

from .report import checks
from .shapes import summary as summary_shape


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
            held = "?" if r["held_grad_bytes"] is None else _mb(r["held_grad_bytes"])
            top = r.get("backward_peak_bytes")
            top = "?" if top is None else _mb(top)
            counted = "" if r["collectives_counted"] else " (NOT COUNTED: internals missing)"
            lines.append(
                f"  {v:<14} reduce-scatter calls {r['reduce_scatter_calls']:>2} "
                f"({_mb(r['reduce_scatter_bytes'])}), all-gathers {r['all_gather_calls']:>2}{counted}, "
                f"gradient held between micro-steps {held} (during a backward up to {top}), "
                f"{r['seconds'] * 1e3:.1f} ms, "
                f"max rel. diff to one process {r['vs_reference']['max_rel']:.1e}"
            )
        if f.get("reduce_ops"):
            lines.append(f"  reduce-scatter ops seen: {', '.join(f['reduce_ops'])}")
    lines += _more(summary)
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


def _more(summary: dict) -> list[str]:
    """The lines of the parts about uneven inputs, clipping, HSDP and Accelerate."""
    lines = []
    if "uneven" in summary:
        u = summary["uneven"]
        p, j = u["plain"], u["join"]
        lines.append(f"\nuneven inputs: micro-batches per rank {u['micro_batches']}, k = {u['k']}")
        lines.append(
            f"  without Join: finished {p['finished']}, all-reduce calls {p['allreduce_calls']}, "
            f"seconds {[round(t, 2) for t in p['seconds']]} (timeout {u['wait_s']:g} s)"
        )
        if p["error"]:
            lines.append(f"    {p['error'][:120]}")
        lines.append(
            f"  with Join: all-reduce calls {j['allreduce_calls']}; rank 0's last window vs its own "
            f"gradient / ranks: max rel. diff {j['rank0_last_window_vs_local_over_world']['max_rel']:.1e}"
        )
    if "clipping" in summary:
        d, f = summary["clipping"]["ddp"], summary["clipping"]["fsdp"]
        lines.append("\ngradient norms (what clipping would use):")
        lines.append(
            f"  DDP before the last micro-step {_floats(d['before_last'])}, after the sync "
            f"{_floats(d['after_sync'])}, one process {d['reference_norm']:.4f}"
        )
        lines.append(
            f"  FSDP2 clip_grad_norm_ before the last micro-step {_floats(f['before_last'])}, after "
            f"{_floats(f['after_sync'])}; shard norms {_floats(f['shard_norms'])}; one process "
            f"{f['reference_norm']:.4f}"
        )
    for part, title in (("hsdp", "HSDP (replicas x shards)"), ("accelerate", "Accelerate")):
        if part not in summary:
            continue
        h = summary[part]
        if "skipped" in h:
            lines.append(f"\n{title}: not run ({h['skipped']})")
            continue
        extra = f" {h['mesh']}" if "mesh" in h else f" {h.get('version', '')}"
        lines.append(f"\n{title}{extra}:")
        for v, r in h.items():
            if isinstance(r, dict) and "per_backward" in r:
                lines.append(
                    f"  {v:<22} all-reduce calls per backward {r['per_backward']}, max rel. diff "
                    f"to one process {r['vs_reference']['max_rel']:.1e}"
                )
    return lines


def _floats(values) -> str:
    return "[" + ", ".join(f"{v:.4f}" for v in values) + "]"
