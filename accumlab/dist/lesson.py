"""Lesson 07's experiments on real processes: `SyncLab` keeps one group of ranks up and runs one
part at a time, when the lesson asks for it; `sync_experiments` runs every part in one go (the
recorder, `python -m accumlab.dist`, the tests).

Both return the same plain dict (JSON ready: counts, bytes, seconds, gradient differences; see
`accumlab.dist.summary`), which `al.dist.checks` and `al.dist.format_summary` read.
"""

from __future__ import annotations

import time

from .. import _validate
from .._validate import one_of, positive_int
from .buckets import bucket_memory
from .clipping import clipping
from .ddp import PITFALL_VARIANTS, SYNC_MODES, pitfall, sweep, sync_modes
from .fsdp import FSDP_VARIANTS, fsdp_accumulation
from .hsdp import HSDP_VARIANTS, hsdp_accumulation
from .references import DDP_MODEL, FSDP_MODEL, PITFALL, SWEEP, TOKENS, UNEVEN
from .summary import PARTS as _SUMMARIES
from .summary import summarise
from .tokens import token_normalisation
from .uneven import uneven_inputs
from .with_accelerate import accelerate_sync

PARTS = tuple(_SUMMARIES)


def lesson_task(
    ctx, *, k: int, micro_batch: int, parts=PARTS, sweep_options=None, seed: int = 0
) -> dict:
    """Runs in every rank: the requested parts one after another on the same process group."""
    size = {"k": k, "micro_batch": micro_batch, "seed": seed}
    runners = {
        "ddp": lambda: sync_modes(ctx, **size, **DDP_MODEL),
        "buckets": lambda: bucket_memory(ctx, seed=seed),
        "sweep": lambda: sweep(ctx, seed=seed, **(sweep_options or SWEEP)),
        "pitfall": lambda: pitfall(ctx, seed=seed, **PITFALL),
        "tokens": lambda: token_normalisation(ctx, seed=seed, **TOKENS),
        "uneven": lambda: uneven_inputs(ctx, seed=seed, **UNEVEN),
        "clipping": lambda: clipping(ctx, **size, ddp_model=DDP_MODEL, fsdp_model=FSDP_MODEL),
        "fsdp": lambda: fsdp_accumulation(ctx, **size, **FSDP_MODEL),
        "hsdp": lambda: hsdp_accumulation(ctx, **size, **FSDP_MODEL),
        "accelerate": lambda: accelerate_sync(ctx, **size, **DDP_MODEL),
    }
    out, seconds = {}, {}
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
        "buckets": 1,
        "sweep": world_size,
        "pitfall": len(PITFALL_VARIANTS),
        "tokens": 1,
        "uneven": 2,
        "clipping": 2,
        "fsdp": len(FSDP_VARIANTS),
        "hsdp": len(HSDP_VARIANTS),
        "accelerate": 2,
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


def check_sizes(k, micro_batch) -> None:
    for name, value, most in (("k", k, 1024), ("micro_batch", micro_batch, 4096)):
        positive_int(name, value)
        if value > most:  # every rank builds world_size × k × micro_batch samples
            raise ValueError(f"{name} must be at most {most}, got {value}")


class SyncLab:
    """Lesson 07's ranks, started once and kept up: `lab = al.dist.SyncLab(2, k=4, micro_batch=8)`
    starts the processes and returns at once; `lab.run("ddp")` runs one part on every rank (after
    the lesson's prediction) and returns its summary; `lab.summary` holds every part run so far
    (what `al.dist.checks` and `al.dist.format_summary` read); `lab.close()` stops the ranks (so
    does dropping `lab`, or the kernel exiting). `lab.ranks.run(...)` runs any other task there."""

    def __init__(
        self,
        world_size: int = 2,
        *,
        k: int = 4,
        micro_batch: int = 8,
        sweep_options: dict | None = None,
        timeout: float = 120.0,
        device: str = "auto",
        seed: int = 0,
    ):
        from .launcher import check_timeout, check_world_size
        from .ranks import Ranks

        check_world_size(world_size)
        check_sizes(k, micro_batch)
        self.sweep_options = check_sweep_options(sweep_options)
        self.timeout = check_timeout(timeout)
        _validate.seed("seed", seed)
        self.k, self.micro_batch, self.seed = k, micro_batch, seed
        self.ranks = Ranks(world_size, device=device)
        self.plan = self.ranks.plan
        self.summary: dict = {}

    def run(self, *parts: str, progress: bool = True, timeout: float | None = None) -> dict:
        """Run `parts` (names from al.dist.PARTS) on every rank; return their summary (the whole
        summary when several parts are given) and add it to `lab.summary`."""
        from .launcher import check_timeout

        parts = check_parts(parts)
        if not parts:
            raise ValueError(f"parts must name at least one of {PARTS}, got none")
        _validate.flag("progress", progress)
        config = {"k": self.k, "micro_batch": self.micro_batch, "parts": parts, "seed": self.seed}
        raw = self.ranks.run(
            "accumlab.dist.lesson:lesson_task",
            {**config, "sweep_options": self.sweep_options},
            timeout=check_timeout(self.timeout if timeout is None else timeout),
            progress_total=progress_steps(parts, self.plan.world_size) if progress else None,
            desc=f"lesson 07 on {self.plan.world_size} ranks: {', '.join(parts)}",
        )
        new = summarise(raw, self.plan, k=self.k, micro_batch=self.micro_batch, seed=self.seed)
        seconds = {**self.summary.get("seconds_per_part", {}), **new.pop("seconds_per_part")}
        self.summary.update(new, seconds_per_part=seconds)
        return new if len(parts) > 1 else new[_summary_key(parts[0])]

    def close(self) -> None:
        self.ranks.close()

    def __enter__(self) -> SyncLab:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SyncLab(k={self.k}, micro_batch={self.micro_batch}) on {self.ranks!r}"


def _summary_key(part: str) -> str:
    return {"buckets": "ddp_buckets"}.get(part, part)


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
    """Start `world_size` ranks, run every part of lesson 07 there, compare with the
    single-process references, and return the summary (see `accumlab.dist.summary`). Lesson 07."""
    positive_int("world_size", world_size)
    check_sizes(k, micro_batch)
    parts = check_parts(parts)
    check_sweep_options(sweep_options)
    _validate.seed("seed", seed)
    _validate.flag("progress", progress)
    from .launcher import check_timeout

    check_timeout(timeout)
    one_of("device", device, ("auto", "cpu"))
    with SyncLab(
        world_size, k=k, micro_batch=micro_batch, sweep_options=sweep_options,
        timeout=timeout, device=device, seed=seed,
    ) as lab:  # fmt: skip
        lab.run(*parts, progress=progress)
        return lab.summary
