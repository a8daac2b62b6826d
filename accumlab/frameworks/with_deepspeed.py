"""Lesson 11: the real DeepSpeed engine, `deepspeed.initialize(...)` with ZeRO stage 0, run on the
CPU in this process: `DS_ACCELERATOR=cpu`, one gloo process (world size 1), the lesson's torch
optimizer and scheduler, in float32 — DeepSpeed refuses float64 gradients ("attempting to reduce an
unsupported grad type: torch.float64", `runtime/engine.py`).

What the source says (deepspeed/runtime/engine.py): `backward(loss, scale_wrt_gas=True)` divides
the loss by `gradient_accumulation_steps`; `step()`, called after every micro-batch, updates only
when `(micro_steps + 1) % gradient_accumulation_steps == 0` (managed accumulation, the default)
or where `set_gradient_accumulation_boundary(True)` says so, then sets every `.grad` to None; its
`micro_steps` counter is never reset between epochs. The runs below measure these.

Where DeepSpeed is not installed, the same loops drive `StandInEngine`, a labelled stand-in that
reproduces only the documented scaling and boundary (the run says which engine it used).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
from contextlib import contextmanager

from .deepspeed_stand_in import StandInEngine
from .problem import Problem


def deepspeed_installed() -> bool:
    """True when the `deepspeed` package can be imported here (nothing is imported)."""
    return importlib.util.find_spec("deepspeed") is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def one_process_group():
    """DeepSpeed on the CPU as one gloo process. The group is made on the first run and kept for
    the rest of the process: DeepSpeed caches groups cloned from it (deepspeed/utils/groups.py),
    so a destroyed and re-made group would leave it holding dead ones. The environment variables
    are put back after each run, so Accelerate and the Trainer still see one plain process."""
    import torch.distributed as dist

    if dist.is_initialized() and dist.get_world_size() != 1:
        raise ValueError(
            f"a torch.distributed process group of {dist.get_world_size()} processes exists in "
            "this process: the lesson's DeepSpeed runs need one process"
        )
    env = {
        "DS_ACCELERATOR": "cpu",  # read when deepspeed is first imported: CPU even on a GPU box
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
    }
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    logger = logging.getLogger("DeepSpeed")
    level = logger.level
    try:
        import deepspeed
        from deepspeed.accelerator import get_accelerator

        logger.setLevel(logging.ERROR)  # its INFO lines (config dumps) would flood the cell
        device = get_accelerator().device_name()
        if device != "cpu":
            raise ValueError(
                f"deepspeed was imported with the {device!r} accelerator before this run; the "
                "lesson's runs need DS_ACCELERATOR=cpu set before its first import (restart the "
                "kernel)"
            )
        # One process reduces nothing through shared memory, and this op is C++ that DeepSpeed
        # would compile on first use (minutes on a 2-core CPU): mark it unavailable, as DeepSpeed
        # itself does on platforms without it (deepspeed/ops/__init__.py keeps this dict for edits)
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False)
        yield deepspeed
    finally:
        logger.setLevel(level)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def config(problem: Problem) -> dict:
    """The engine's configuration: DeepSpeed's batch triple, ZeRO stage 0, no clipping, quiet.
    train_batch_size = train_micro_batch_size_per_gpu × gradient_accumulation_steps × GPUs (one
    process here): DeepSpeed fills in a missing one of the three and refuses a mismatch."""
    return {
        "train_micro_batch_size_per_gpu": problem.micro_batch_size,
        "gradient_accumulation_steps": problem.k,
        "train_batch_size": problem.micro_batch_size * problem.k,  # × 1 process
        "zero_optimization": {"stage": 0},
        "gradient_clipping": 0.0,
        "steps_per_print": 10**9,  # no progress lines in the notebook
    }


@contextmanager
def _engine(problem: Problem, model, optimizer, scheduler):
    if not deepspeed_installed():
        yield StandInEngine(model, optimizer, scheduler, problem.k), "stand-in"
        return
    with one_process_group() as deepspeed:
        engine, *_ = deepspeed.initialize(
            model=model, optimizer=optimizer, lr_scheduler=scheduler, config=config(problem)
        )
        yield engine, f"deepspeed {deepspeed.__version__}"


def deepspeed_loop(
    problem: Problem,
    model,
    optimizer,
    scheduler,
    folder: str,
    *,
    divide_by_k: bool = False,
    epochs: int = 1,
) -> dict:
    """DeepSpeed's documented loop: `engine(x)`, `engine.backward(loss)`, `engine.step()` on every
    micro-batch, the micro-batch MEAN loss. `divide_by_k=True` is the habit from plain PyTorch,
    `engine.backward(loss / k)`: divided twice."""
    with _engine(problem, model, optimizer, scheduler) as (engine, which):
        for _ in range(epochs):
            for mb in problem.micro_batches():
                loss = problem.mean_loss(engine(mb.x), mb.y)
                if divide_by_k:
                    loss = loss / problem.k  # the engine divides AGAIN
                engine.backward(loss)
                engine.step()  # updates only on the accumulation boundary
    return {"engine": which}


def deepspeed_exact_loop(problem: Problem, model, optimizer, scheduler, folder: str) -> dict:
    """Exact, short last window and tokens included: mark each window's last micro-batch as the
    boundary (`set_gradient_accumulation_boundary`, the answer in DeepSpeed issue #7439), and hand
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
    return {"engine": which}
