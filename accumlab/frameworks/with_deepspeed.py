"""Lesson 11: the real DeepSpeed engine, `deepspeed.initialize(...)` with ZeRO stage 0, run on the
CPU in this process (`deepspeed_process.py`: the CPU accelerator, one gloo process, world size 1),
the lesson's torch optimizer and scheduler, in float32 — DeepSpeed refuses float64 gradients
("attempting to reduce an unsupported grad type: torch.float64", `runtime/engine.py`).

What the source says (deepspeed/runtime/engine.py): `backward(loss, scale_wrt_gas=True)` divides
the loss by `gradient_accumulation_steps`. In managed accumulation (the default) `step()`, called
after every micro-batch, updates only when `(micro_steps + 1) % gradient_accumulation_steps == 0`
or while `set_gradient_accumulation_boundary(True)` is in force — the flag stays until set again;
`micro_steps` is never reset between epochs. With `"managed_gradient_accumulation": false` every
`step()` updates and the caller owns the boundary (`set_gradient_accumulation_boundary` is then
refused). At ZeRO 0 in float32 an update ends by setting every `.grad` to None (no `zero_grad`
call; with ZeRO, fp16 or bf16 it calls the optimizer's `zero_grad`). The runs below measure these.

Where DeepSpeed is not installed, the same loops drive `StandInEngine`, a labelled stand-in that
reproduces only the documented scaling and boundaries (the run says which engine it used).
"""

from __future__ import annotations

import importlib.util
from contextlib import contextmanager

from .. import _validate
from .deepspeed_process import one_process_group
from .deepspeed_stand_in import StandInEngine
from .problem import Problem

MAX_EPOCHS = 4  # the recorder stops a loop past 4 × 10 + 16 forwards (hooks.py)


def deepspeed_installed() -> bool:
    """True when the `deepspeed` package can be imported here (nothing is imported)."""
    return importlib.util.find_spec("deepspeed") is not None


def config(problem: Problem, *, managed: bool = True) -> dict:
    """The engine's configuration: DeepSpeed's batch triple, ZeRO stage 0, no clipping, quiet.
    train_batch_size = train_micro_batch_size_per_gpu × gradient_accumulation_steps × data-parallel
    ranks (one here): DeepSpeed fills in what is missing and refuses a mismatch
    (`deepspeed_batch_triple` shows it)."""
    return {
        "train_micro_batch_size_per_gpu": problem.micro_batch_size,
        "gradient_accumulation_steps": problem.k,
        "train_batch_size": problem.micro_batch_size * problem.k,  # × 1 rank
        "zero_optimization": {"stage": 0},
        "gradient_clipping": 0.0,
        "steps_per_print": 10**9,  # no progress lines in the notebook
        **({} if managed else {"managed_gradient_accumulation": False}),
    }


@contextmanager
def _engine(problem: Problem, model, optimizer, scheduler, *, managed: bool = True):
    if not deepspeed_installed():
        stand_in = StandInEngine(model, optimizer, scheduler, problem.k, managed=managed)
        yield stand_in, "stand-in"
        return
    with one_process_group() as deepspeed:
        engine, *_ = deepspeed.initialize(
            model=model,
            optimizer=optimizer,
            lr_scheduler=scheduler,
            config=config(problem, managed=managed),
        )
        yield engine, f"deepspeed {deepspeed.__version__}"


def _said(engine, which: str) -> dict:
    """What a run reports about its engine, read from the engine object built, not from package
    metadata: whether it IS a `deepspeed.DeepSpeedEngine` (False for the stand-in, or for any
    object that merely reports DeepSpeed's version), and whether DeepSpeed's own monitor
    (TensorBoard, W&B, CSV: the config's "monitor" sections) would log anything."""
    real = False
    if deepspeed_installed():
        import deepspeed

        real = isinstance(engine, deepspeed.DeepSpeedEngine)
    monitor = getattr(engine, "monitor", None)
    return {
        "engine": which,
        "deepspeed_engine": real,
        "monitor_enabled": bool(getattr(monitor, "enabled", False)),
    }


def deepspeed_loop(
    problem: Problem,
    model,
    optimizer,
    scheduler,
    folder: str,
    *,
    divide_by_k: bool = False,
    epochs: int = 1,
    mark_last: bool = False,
) -> dict:
    """DeepSpeed's documented loop: `engine(x)`, `engine.backward(loss)`, `engine.step()` on every
    micro-batch, the micro-batch MEAN loss. `divide_by_k=True` is the habit from plain PyTorch,
    `engine.backward(loss / k)`. `mark_last=True` calls `set_gradient_accumulation_boundary(True)`
    before each epoch's last micro-batch, to step the short window, and never sets it back."""
    _validate.flag("divide_by_k", divide_by_k)
    _validate.flag("mark_last", mark_last)
    epochs = _validate.positive_int(
        "epochs", epochs, maximum=MAX_EPOCHS, why="10 micro-batches each"
    )
    with _engine(problem, model, optimizer, scheduler) as (engine, which):
        for _ in range(epochs):
            batches = problem.micro_batches()
            for i, mb in enumerate(batches):
                if mark_last and i == len(batches) - 1:
                    engine.set_gradient_accumulation_boundary(True)  # in force until set again
                loss = problem.mean_loss(engine(mb.x), mb.y)
                if divide_by_k:
                    loss = loss / problem.k  # the engine divides AGAIN
                engine.backward(loss)
                engine.step()  # updates only on the accumulation boundary
    return _said(engine, which)


def deepspeed_exact_loop(problem: Problem, model, optimizer, scheduler, folder: str) -> dict:
    """Exact, short last window and tokens included, in managed mode: before EVERY micro-batch set
    the boundary (True on each window's last, False otherwise — the flag persists), and hand
    `backward` Σ item losses ÷ window items with `scale_wrt_gas=False` (no second division)."""
    with _engine(problem, model, optimizer, scheduler) as (engine, which):
        batches = problem.micro_batches()
        for window in problem.windows():
            items = sum(problem.items(batches[i].y) for i in window)
            for j, i in enumerate(window):
                engine.set_gradient_accumulation_boundary(j == len(window) - 1)
                loss = problem.sum_loss(engine(batches[i].x), batches[i].y) / items
                engine.backward(loss, scale_wrt_gas=False)
                engine.step()
    return _said(engine, which)


def deepspeed_unmanaged_loop(problem: Problem, model, optimizer, scheduler, folder: str) -> dict:
    """Exact with caller-owned boundaries (`"managed_gradient_accumulation": false`): `backward`
    of Σ item losses ÷ window items with `scale_wrt_gas=False` on each micro-batch, and ONE
    `step()` per window — every step() is a boundary."""
    with _engine(problem, model, optimizer, scheduler, managed=False) as (engine, which):
        batches = problem.micro_batches()
        for window in problem.windows():
            items = sum(problem.items(batches[i].y) for i in window)
            for i in window:
                loss = problem.sum_loss(engine(batches[i].x), batches[i].y) / items
                engine.backward(loss, scale_wrt_gas=False)
            engine.step()  # the window's boundary, because the caller says so
    return _said(engine, which)


TRIPLE = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


def deepspeed_batch_triple(
    train_batch_size: int | None = None,
    train_micro_batch_size_per_gpu: int | None = None,
    gradient_accumulation_steps: int | None = None,
) -> dict:
    """What DeepSpeed's own configuration (`DeepSpeedConfig`, the class `initialize` builds) makes
    of the batch sizes given, for one data-parallel rank: the three values filled in, and
    `refused` — DeepSpeed's message, or "" when it accepted them. Lesson 11."""
    values = (train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps)
    given = {
        name: _validate.positive_int(name, value)
        for name, value in zip(TRIPLE, values)
        if value is not None
    }
    if not deepspeed_installed():
        raise ValueError("deepspeed is not installed here: its configuration cannot be asked")
    with one_process_group():
        from deepspeed.runtime.config import DeepSpeedConfig

        try:
            made = DeepSpeedConfig(dict(given))
        except AssertionError as err:  # DeepSpeed states its batch rules as asserts
            return {**dict.fromkeys(TRIPLE), **given, "refused": str(err)}
    return {**{name: getattr(made, name) for name in TRIPLE}, "refused": ""}
