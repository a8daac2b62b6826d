"""Run one framework (or the reference) on one of lesson 11's problems and record what it did."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import PackageNotFoundError, version

import torch

from .. import _validate
from .._threads import one_thread
from .._validate import one_of
from ..exercises._limit import AnswerTimeout, call_within
from .deepspeed_process import cpu_accelerator
from .hooks import FrameworkRun, Recorder, RunawayLoop
from .plain import reference_loop, textbook_loop
from .problem import DATASETS, make_problem
from .process_state import own_accelerate_state
from .quiet import offline_and_quiet
from .with_accelerate import (
    accelerate_global_loop,
    accelerate_handset_loop,
    accelerate_loop,
    accelerate_prefetch_loop,
    accelerate_unprepared_loop,
)
from .with_deepspeed import deepspeed_exact_loop, deepspeed_loop, deepspeed_unmanaged_loop
from .with_lightning import lightning_exact_loop, lightning_loop
from .with_trainer import trainer_loop


@dataclass(frozen=True)
class Framework:
    label: str  # how the table and the plots name it
    package: str | None  # the distribution whose version the run reports; None: accumlab only
    runner: Callable = field(repr=False)
    what: str = ""  # one line: what this run does
    dtype: torch.dtype = torch.float64  # DeepSpeed refuses float64 gradients: float32 there


FRAMEWORKS: dict[str, Framework] = {
    "reference": Framework(
        "reference", None, reference_loop, "exact: Σ item losses ÷ items in the window"
    ),
    "plain_loop": Framework(
        "plain PyTorch loop", None, textbook_loop, "textbook `(loss / k).backward()`"
    ),
    "accelerate": Framework(
        "Accelerate", "accelerate", accelerate_loop, "`accumulate()` + `accelerator.backward(loss)`"
    ),
    "lightning": Framework(
        "Lightning", "lightning", lightning_loop, "`Trainer(accumulate_grad_batches=k)`"
    ),
    "trainer": Framework(
        "Transformers Trainer (clipping off)",
        "transformers",
        partial(trainer_loop, mode="mean"),
        "model returns the micro-batch mean",
    ),
    "trainer_num_items": Framework(
        "Trainer + num_items_in_batch (clipping off)",
        "transformers",
        partial(trainer_loop, mode="num_items"),
        "`forward(..., num_items_in_batch=None, **kwargs)`",
    ),
    "deepspeed": Framework(
        "DeepSpeed",
        "deepspeed",
        deepspeed_loop,
        "`engine.backward(loss)`, `engine.step()` every micro-batch (float32, ZeRO 0)",
        torch.float32,
    ),
}
# runs the lesson shows beside the main table: the fixes, and the traps
VARIANTS: dict[str, Framework] = {
    "accelerate_global": Framework(
        "Accelerate, the guide's variable-size skeleton",
        "accelerate",
        accelerate_global_loop,
        "windows prefetched and counted, Σ × k ÷ items, a step per window, no `accumulate()`",
    ),
    "accelerate_handset": Framework(
        "Accelerate, sync_gradients set by hand",
        "accelerate",
        accelerate_handset_loop,
        "prefetch, `accumulate()`, `sync_gradients` set True every k-th micro-batch only",
    ),
    "accelerate_unprepared": Framework(
        "Accelerate, loader not prepared",
        "accelerate",
        accelerate_unprepared_loop,
        "dataloader not passed to `prepare`",
    ),
    "accelerate_prefetch": Framework(
        "Accelerate, windows prefetched, accumulate()",
        "accelerate",
        accelerate_prefetch_loop,
        "each window taken with `next()`, then `accumulate()` per micro-batch",
    ),
    "accelerate_prefetch_all": Framework(
        "Accelerate, epoch prefetched, accumulate()",
        "accelerate",
        partial(accelerate_prefetch_loop, prefetch="all"),
        "`list(loader)` first, then `accumulate()` per micro-batch",
    ),
    "lightning_exact": Framework(
        "Lightning, Σ × k ÷ window items", "lightning", lightning_exact_loop, "exact training_step"
    ),
    "trainer_kwargs_ignored": Framework(
        "Trainer, **kwargs ignored",
        "transformers",
        partial(trainer_loop, mode="kwargs_ignored"),
        "forward takes **kwargs, returns the mean",
    ),
    "trainer_named_only": Framework(
        "Trainer, num_items_in_batch named, no **kwargs",
        "transformers",
        partial(trainer_loop, mode="num_items_named"),
        "`forward(x, labels, num_items_in_batch=None)`: no **kwargs",
    ),
    "trainer_default_clip": Framework(
        "Trainer, default max_grad_norm",
        "transformers",
        partial(trainer_loop, mode="mean", max_grad_norm=None),
        "clipping left at its default",
    ),
    "deepspeed_double": Framework(
        "DeepSpeed, loss / k",
        "deepspeed",
        partial(deepspeed_loop, divide_by_k=True),
        "`engine.backward(loss / k)`: divided twice",
        torch.float32,
    ),
    "deepspeed_exact": Framework(
        "DeepSpeed, boundary set, Σ ÷ window items",
        "deepspeed",
        deepspeed_exact_loop,
        "`set_gradient_accumulation_boundary` before every micro-batch, `scale_wrt_gas=False`",
        torch.float32,
    ),
    "deepspeed_unmanaged": Framework(
        "DeepSpeed, unmanaged, Σ ÷ window items",
        "deepspeed",
        deepspeed_unmanaged_loop,
        "`managed_gradient_accumulation: false`, one `step()` per window, `scale_wrt_gas=False`",
        torch.float32,
    ),
    "deepspeed_boundary_once": Framework(
        "DeepSpeed, boundary set once",
        "deepspeed",
        partial(deepspeed_loop, mark_last=True),
        "`set_gradient_accumulation_boundary(True)` before each epoch's last micro-batch only",
        torch.float32,
    ),
}
ALL = {**FRAMEWORKS, **VARIANTS}


def lr_factor(step: int) -> float:
    """The schedule every run uses: strictly decreasing, so a scheduler stepped too often or too
    rarely shows in the learning rate of the first step it affects (as in lesson 08)."""
    step = _validate.positive_int("step", step, minimum=0)
    return 1.0 / (1.0 + step)


def package_version(package: str | None) -> str:
    if package is None:
        return f"torch {torch.__version__}"
    try:
        return f"{package} {version(package)}"
    except PackageNotFoundError:
        return f"{package} (not installed)"


def versions() -> dict[str, str]:
    """Installed versions of torch and the four frameworks (read from package metadata: nothing
    is imported)."""
    packages = ("torch", "accelerate", "lightning", "transformers", "deepspeed")
    return {p: package_version(p) for p in packages}


def run_framework(
    name: str, data: str = "regression", k: int = 4, *, seed: int = 0, **options
) -> FrameworkRun:
    """Train one epoch of lesson 11's `data` problem with `name` (a key of FRAMEWORKS or VARIANTS)
    and k accumulation steps; return what the hooks recorded. Introduced in lesson 11.

    Every run starts from the same weights, uses plain SGD (lr 0.1) and a LambdaLR scheduler
    (lr × 1/(1 + step)), runs offline on one CPU thread and writes nothing that outlives it.
    `seed` draws another data set of the same problem. `options` go to the runner (e.g.
    `compute_loss_func=` for the Trainer).
    """
    one_of("name", name, ALL)
    spec = ALL[name]
    runner = partial(spec.runner, **options)
    return run_loop(runner, data, k, name=name, package=spec.package, dtype=spec.dtype, seed=seed)


@one_thread()
def run_loop(
    runner: Callable,
    data: str = "regression",
    k: int = 4,
    *,
    name: str = "your loop",
    package: str | None = None,
    time_limit: float = 60.0,
    dtype: torch.dtype = torch.float64,
    seed: int = 0,
) -> FrameworkRun:
    """`runner(problem, model, optimizer, scheduler, folder) -> logged` on a fresh problem, recorded
    like every framework run (the exercises run learners' loops through it). Lesson 11.

    `seed` draws another token data set (other lengths, so other window counts; the lesson's is
    0). A runner still running after `time_limit` seconds, or forwarding far more often than one
    epoch needs, is stopped and said so (a ValueError naming it), never left to hang. Accelerate's
    process-wide device state is the run's own and put back afterwards (`process_state.py`)."""
    _validate.function("runner", runner)
    seconds = _validate.positive_float("time_limit", time_limit)
    problem = make_problem(data, k, dtype=dtype, seed=seed)
    model = problem.model()
    optimizer = torch.optim.SGD(model.parameters(), lr=problem.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    run = FrameworkRun(name, package_version(package), problem)
    recorder = Recorder(run, model, problem.micro_batches())
    recorder.watch(optimizer, scheduler)
    started = time.monotonic()
    try:
        # cpu_accelerator: whichever framework imports deepspeed first (the Trainer does) must
        # start it on the CPU, also where a GPU exists
        with offline_and_quiet() as folder, cpu_accelerator(), own_accelerate_state():
            logged = call_within(seconds, runner, problem, model, optimizer, scheduler, folder)
    except AnswerTimeout:  # (or a limit around this call, such as al.check's, ended first)
        raise ValueError(
            f"runner was still running after {min(time.monotonic() - started, seconds):.3g} s and was "
            "stopped: a loop that never ends? (run_loop(..., time_limit=...) allows longer)"
        ) from None
    except RunawayLoop as err:
        raise ValueError(f"runner was stopped: {err}. Does its loop end?") from None
    finally:
        run = recorder.finish()  # hooks removed even when the loop raised
    if logged is not None and not isinstance(logged, dict):
        raise ValueError(
            f"runner must return a dict of what it logged (or None), got "
            f"{type(logged).__name__} {logged!r:.60}"
        )
    logged = logged or {}
    run.logged_loss = logged.get("loss")
    run.logged_grad_norm = logged.get("grad_norm")
    run.extra = {key: v for key, v in logged.items() if key not in ("loss", "grad_norm")}
    if logged.get("engine") == "stand-in":  # DeepSpeed not installed: say so wherever it shows
        run.version = "STAND-IN (deepspeed not installed)"
    return run


def run_all(
    names: tuple[str, ...] | list[str] = tuple(FRAMEWORKS),
    data: tuple[str, ...] | list[str] = ("regression", "tokens"),
    k: int = 4,
    *,
    progress: bool = True,
) -> dict[str, dict[str, FrameworkRun]]:
    """`run_framework` for every name on every problem: {data: {name: run}}. Lesson 11."""
    from tqdm.auto import tqdm

    for i, name in enumerate(_validate.sequence("names", names)):
        one_of(f"names[{i}]", name, ALL)
    for i, d in enumerate(_validate.sequence("data", data)):
        one_of(f"data[{i}]", d, DATASETS)
    make_problem(k=k)  # checks k before any run
    _validate.flag("progress", progress)
    jobs = [(d, n) for d in data for n in names]
    out: dict[str, dict[str, FrameworkRun]] = {d: {} for d in data}
    for d, n in tqdm(jobs, desc=f"runs at k={k}", disable=not progress, leave=False):
        out[d][n] = run_framework(n, d, k)
    return out
