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
        out.update(bucket_checks(summary["ddp_buckets"]))
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
    if "uneven" in summary:
        out.update(uneven_checks(summary["uneven"]))
    if "clipping" in summary:
        out.update(clipping_checks(summary["clipping"]))
    if "hsdp" in summary and "skipped" not in summary["hsdp"]:
        h = summary["hsdp"]
        out[
            "HSDP: set_requires_all_reduce(False) all-reduces across replicas on the last micro-step only"
        ] = (
            _last_only(h["all_reduce_last"]["per_backward"], k)
            and min(h["sync_each"]["per_backward"]) > 0
        )
        out["HSDP: every variant gives every rank the single-process gradient"] = _exact(h.values())
    if "accelerate" in summary and "skipped" not in summary["accelerate"]:
        a = summary["accelerate"]
        each, once = a["sync_each_batch_true"], a["sync_each_batch_false"]
        out[
            "Accelerate: accumulate() syncs on the last micro-step only; sync_each_batch=True on every one"
        ] = (
            _last_only(once["per_backward"], k)
            and len(each["per_backward"]) == k
            and min(each["per_backward"]) > 0
        )
        out["Accelerate: both settings give the single-process gradient"] = _exact([each, once])
    return out


# the most stray bytes a CPU reading may carry beside whole copies: four float32 scalars. A
# micro-step's loss and its sum (4 bytes each) were seen alive at a reading, under load, about
# once in 2,000 readings; the smallest gradient copy the checks look for is 297,988 bytes
CPU_STRAY_BYTES = 16


def copies(nbytes: int, grad_bytes: int, n_params: int, block: int = 512) -> float | None:
    """`nbytes` in whole copies of the gradients, or None when it is not a whole number of them:
    c copies are c·grad_bytes, plus less than `block` bytes per parameter and copy (CUDA's
    allocator rounds every block up to 512 bytes); `block=0` (the CPU meter counts exact bytes):
    c·grad_bytes plus at most CPU_STRAY_BYTES of scalars still alive."""
    c = nbytes // grad_bytes
    slack = nbytes - c * grad_bytes
    allowed = block * n_params * max(c, 1) if block else CPU_STRAY_BYTES + 1
    return c if slack == 0 or 0 < slack < allowed else None


def rounding(buckets: dict) -> int:
    """The allocator's block size `copies` allows for in a bucket measurement: 0 on the CPU
    (exact bytes), 512 on a GPU."""
    return 0 if buckets["device"] == "cpu" else 512


def window_pattern(k: int, windows: int) -> dict[str, list[int]]:
    """Copies of the gradients held after each micro-step of `windows` no_sync windows, as DDP
    keeps them: the buckets always; fresh .grad tensors beside them unless every .grad is
    already a view into its bucket, which a synced backward makes it (view True) and
    zero_grad(set_to_none=True) undoes."""
    window = [2] * (k - 1) + [1]
    return {
        "view_false_set_to_none_true": [2] * (k * windows),
        "view_false_set_to_none_false": [2] * (k * windows),
        "view_true_set_to_none_true": window * windows,
        "view_true_set_to_none_false": window + [1] * (k * (windows - 1)),
        # every micro-step synced: each fresh .grad becomes a view into its bucket at once
        "view_false_sync_each": [2] * (k * windows),
        "view_true_sync_each": [1] * (k * windows),
    }


def bucket_checks(b: dict) -> dict[str, bool]:
    """Whole copies of the gradients DDP holds: after one backward, and under no_sync windows."""
    g, view, n, block = b["grad_bytes"], b["gradient_as_bucket_view"], b["n_params"], rounding(b)
    out = {
        "DDP buckets: a second copy of the gradients, unless gradient_as_bucket_view": (
            [
                copies(view[v][when], g, n, block)
                for v in ("false", "true")
                for when in ("after_wrap", "after_backward")
            ]
            == [1, 2, 1, 1]
        )
    }
    held = b["window"]
    k_windows = len(held["view_false_set_to_none_true"])
    k = b.get("k", 4)
    want = window_pattern(k, k_windows // k)
    got = {key: [copies(x, g, n, block) for x in held[key]] for key in want}
    no_sync = [key for key in want if "set_to_none" in key]
    out[
        "DDP buckets under no_sync: the view saves the copy only with zero_grad(set_to_none=False), from the second window"
    ] = all(got[key] == want[key] for key in no_sync)
    out["DDP buckets syncing every micro-step: the view holds one copy"] = (
        got["view_true_sync_each"] == want["view_true_sync_each"]
        and got["view_false_sync_each"] == want["view_false_sync_each"]
    )

    def two_at_most(nbytes: int) -> bool:  # two copies, with the slack `copies` allows
        return nbytes <= 2 * g + (2 * block * n if block else CPU_STRAY_BYTES)

    peak = b["window_peak"]  # the most held at once, per window
    kept, each = peak["view_true_set_to_none_false"], peak["view_true_sync_each"]
    others = [x for key in no_sync if key != "view_true_set_to_none_false" for x in peak[key]]
    out[
        "DDP buckets' high point: above two copies under no_sync, except with the views kept from the second window (DDP's bucket rebuild: the old buckets, held by the views, beside the new), and as when syncing every micro-step from the third"
    ] = (
        len(kept) == k_windows // k >= 3
        and not two_at_most(kept[0])
        and all(two_at_most(x) for x in kept[1:] + each)
        # after the rebuild, the backward's own high point: the same bytes as syncing every step
        # (within 1 % of the gradients or the allocator's rounding: the rebuild's 2 copies
        # against a backward's 1.97 is refused)
        and all(
            abs(a - b) <= max(0.01 * g, 2 * block * n)
            for a, b in zip(kept[2:], each[2:], strict=True)
        )
        and not any(two_at_most(x) for x in others)
    )
    return out


def _last_only(per_backward, k) -> bool:
    return [n > 0 for n in per_backward] == [False] * (k - 1) + [True]


def _exact(results) -> bool:
    return all(
        r["vs_reference"]["max_rel"] < TOLERANCE and r["rank_max_abs_diff"] <= TOLERANCE * 1e-3
        for r in results
        if isinstance(r, dict)
    )


def uneven_checks(u: dict) -> dict[str, bool]:
    """A rank with one micro-batch more: without Join its extra all-reduce is never joined (it
    waits until the group's timeout, the others finish); with Join every rank takes part."""
    plain, join, counts = u["plain"], u["join"], u["micro_batches"]
    world, k = len(counts), u["k"]
    extra_call = counts[0] // k + 1  # the syncs of its full windows, then the short one's
    return {
        "uneven inputs: without Join the rank with the extra micro-batch waits alone until the timeout": (
            plain["finished"] == [False] + [True] * (world - 1)
            and plain["allreduce_calls"][0] == extra_call
            and all(c == extra_call - 1 for c in plain["allreduce_calls"][1:])
            and plain["seconds"][0] >= u["wait_s"]
        ),
        "uneven inputs: with Join the finished ranks join the extra all-reduce, with zeros": (
            join["allreduce_calls"] == [extra_call] * world
            and join["rank0_last_window_vs_local_over_world"]["max_rel"] < TOLERANCE
        ),
        **join_checks(join, world),
    }


def join_checks(join: dict, world: int) -> dict[str, bool]:
    """What Join costs and divides by: two all-reduces of its own in every forward (three with
    throw_on_early_termination), and a division by the ranks still in only without a comm hook
    and with divide_by_initial_world_size=False (rank 0 is alone in its last window)."""
    ratio = join["rank0_last_window_over_local"]
    want = {"hook_initial": 1 / world, "hook_remaining": 1 / world,
            "no_hook_initial": 1 / world, "no_hook_remaining": 1.0}  # fmt: skip
    forwards = join["forwards"][0]
    throw = join["throw"]
    return {
        "Join: every forward adds two all-reduces of its own, no_sync or not": (
            join["other_allreduce_per_forward"] == [2] * forwards
        ),
        "Join: a comm hook divides by the group's size whatever divide_by_initial_world_size says": (
            all(abs(ratio[v] - want[v]) < TOLERANCE for v in want)
            and join["rank0_last_window_off_proportional"] < TOLERANCE
        ),
        "Join: throw_on_early_termination raises on every rank, with a third all-reduce per forward": (
            all(throw["raised"])
            and throw["other_allreduce_per_forward"]
            == [3] * len(throw["other_allreduce_per_forward"])
            and len(throw["other_allreduce_per_forward"]) >= 1
        ),
    }


def clipping_checks(c: dict) -> dict[str, bool]:
    """The norm to clip by exists only after the final sync; FSDP2 computes it over all shards."""
    ddp, fsdp = c["ddp"], c["fsdp"]
    return {
        "clipping: before the final sync the ranks' DDP gradient norms differ; after it all equal one process's": (
            len(set(ddp["before_last"])) == len(ddp["before_last"]) > 1
            and ddp["after_sync_vs_reference"] < TOLERANCE
        ),
        "clipping: FSDP2's clip_grad_norm_ sees no gradient before the final sync, the global norm after it": (
            all(n == 0.0 for n in fsdp["before_last"])
            and fsdp["after_sync_vs_reference"] < TOLERANCE
            and fsdp["shards_combined_vs_reference"] < TOLERANCE
            # every shard holds part of the gradient, and the ranks' shard norms differ: a rank
            # clipping by its own shard's norm would scale by its own factor
            and min(fsdp["shard_norms"]) > 0
            and len({round(n, 9) for n in fsdp["shard_norms"]}) == len(fsdp["shard_norms"])
            and fsdp["clipped_vs_reference"]["max_rel"]
            < 1e-6  # clip_grad_norm_ adds 1e-6 to the norm
        ),
    }


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
    if "shard_bytes_expected" in f and each.get("held_grad_bytes") is not None:
        per_rank = each.get("held_grad_bytes_per_rank", [each["held_grad_bytes"]])
        out[
            "FSDP2: syncing every micro-step, every rank holds its padded shard between micro-steps"
        ] = (
            per_rank == [f["shard_bytes_expected"]] * len(per_rank)
            and last["held_grad_bytes"] == f["param_bytes_full"]
        )
        # gradient storages at each synced backward's reduce-scatter: the shards held before it,
        # plus a unit's whole gradient (the collective's input); 0 where no reduce-scatter ran
        before = [0] + each["grad_bytes_per_micro_step"][:-1]
        at = each["grad_bytes_at_reduce_scatter"]
        out["FSDP2: during each synced backward a unit's whole gradient exists on top of that"] = (
            len(at) == k
            and all(a >= b + max(f["unit_bytes"]) for a, b in zip(at, before, strict=True))
        )
    mesh = f.get("default_mesh") or {}
    if mesh.get("mesh_device") is not None:  # built only on a machine without a GPU
        out[
            "FSDP2: without a mesh, fully_shard builds a CPU mesh over all ranks on a CPU-only machine"
        ] = mesh["mesh_device"] == "cpu" and mesh["mesh_ranks"] == world
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
    if "sync_last_keep_all" in f:
        gathers = f["sync_last_keep_all"]["all_gather_per_micro_step"]
        out["FSDP2: not resharding after forward either: all-gathers in the first forward only"] = (
            gathers[0] > 0 and gathers[1:] == [0] * (len(gathers) - 1)
        )
    return out
