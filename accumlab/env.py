"""`al.setup()`: seed everything and report what this machine offers (lesson 00)."""

from __future__ import annotations

import os
import random
import shutil
import warnings
from dataclasses import dataclass

import torch

# Tests set ACCUMLAB_GPU_STANDIN=cpu so that `al.setup()` reports one "GPU" that is the CPU: the
# lessons' GPU branches then run end to end on a machine without one. It is ignored where a real
# GPU exists, and announced loudly wherever it is honoured.
STANDIN_ENV = "ACCUMLAB_GPU_STANDIN"
STANDIN_NAME = f"CPU stand-in for a GPU ({STANDIN_ENV}=cpu): no GPU measurement"


@dataclass(frozen=True)
class Env:
    """What a lesson can rely on: chosen device, GPUs, Graphviz, CPUs, fast mode."""

    device: torch.device
    gpu_count: int
    gpu_name: str | None
    has_dot: bool
    cpu_count: int  # os.cpu_count(): logical CPUs, not physical cores
    torch_version: str
    seed: int
    fast: bool
    standin: bool = False  # gpu_count > 0 only because of ACCUMLAB_GPU_STANDIN=cpu
    threads: int = 0  # torch's intra-op CPU threads, as al.setup() chose them
    threads_why: str = ""  # what that number was chosen from

    def __str__(self) -> str:
        gpu = f"{self.gpu_count} GPU(s): {self.gpu_name}" if self.gpu_count else "no GPU"
        if self.standin:
            gpu = f"STAND-IN: the GPU branches run on the CPU ({STANDIN_ENV}=cpu)"
        dot = "Graphviz dot found" if self.has_dot else "no Graphviz dot (text graphs)"
        return (
            f"torch {self.torch_version} | device {self.device} | {gpu} | {dot} | "
            f"{self.cpu_count} CPU(s), {self.threads} torch thread(s) ({self.threads_why}) | "
            f"seed {self.seed}" + (" | fast mode" if self.fast else "")
        )


def has_dot() -> bool:
    """True when Graphviz's `dot` executable is on PATH (torchviz needs it to render)."""
    return shutil.which("dot") is not None


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # numpy is optional for accumlab itself
        pass


def setup(seed: int = 0, *, fast: bool | None = None, threads: int | None = None) -> Env:
    """Seed Python, NumPy and torch, size torch's CPU thread pool, and describe the machine.
    Introduced in lesson 00.

    `fast` (default: the ACCUMLAB_FAST environment variable) asks lessons for smaller sweeps; the
    relations they assert are the same, only the number of points drawn changes. `threads`
    (default: OMP_NUM_THREADS when it is a positive whole number, otherwise chosen from the CPUs
    this process may really use, see `accumlab._threads`) is torch's intra-op thread count.
    """
    from ._threads import ThreadChoice, choose_threads
    from ._validate import flag, positive_int
    from ._validate import seed as check_seed

    seed = check_seed("seed", seed)  # numpy takes seeds below 2**32 only
    if fast is not None:
        flag("fast", fast)
    if threads is not None:
        most = 4 * (os.cpu_count() or 1)
        threads = positive_int("threads", threads, maximum=most, why="4 per CPU core")
    choice = choose_threads() if threads is None else ThreadChoice(threads, "asked for")
    torch.set_num_threads(choice.threads)
    seed_everything(seed)
    from .figures import show_figures_inline

    show_figures_inline()  # plots are pure Figures: make Jupyter draw them, not print "Figure(...)"
    if fast is None:
        fast = os.environ.get("ACCUMLAB_FAST", "") not in ("", "0")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    standin = _standin(gpus)
    return Env(
        device=torch.device("cuda" if gpus else "cpu"),
        gpu_count=1 if standin else gpus,
        gpu_name=STANDIN_NAME if standin else torch.cuda.get_device_name(0) if gpus else None,
        has_dot=has_dot(),
        cpu_count=os.cpu_count() or 1,
        torch_version=torch.__version__,
        seed=seed,
        fast=bool(fast),
        standin=standin,
        # the number chosen, not read back from torch: a lesson can check torch runs it
        threads=choice.threads,
        threads_why=choice.reason,
    )


def _standin(gpus: int) -> bool:
    value = os.environ.get(STANDIN_ENV, "")
    if value in ("", "0"):
        return False
    if value != "cpu":
        raise ValueError(f"{STANDIN_ENV} must be 'cpu' (or unset), got {value!r}")
    if gpus:
        warnings.warn(f"{STANDIN_ENV}=cpu ignored: this machine has a GPU", stacklevel=3)
        return False
    warnings.warn(
        f"{STANDIN_ENV}=cpu: al.setup() reports a stand-in GPU, so GPU branches run on the CPU "
        "(for testing them); nothing they print is a GPU measurement. Unset it to learn.",
        stacklevel=3,
    )
    return True
