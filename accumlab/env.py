"""`al.setup()`: seed everything and report what this machine offers (lesson 00)."""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Env:
    """What a lesson can rely on: chosen device, GPUs, Graphviz, CPU cores, fast mode."""

    device: torch.device
    gpu_count: int
    gpu_name: str | None
    has_dot: bool
    cpu_count: int
    torch_version: str
    seed: int
    fast: bool

    def __str__(self) -> str:
        gpu = f"{self.gpu_count} GPU(s): {self.gpu_name}" if self.gpu_count else "no GPU"
        dot = "Graphviz dot found" if self.has_dot else "no Graphviz dot (text graphs)"
        return (
            f"torch {self.torch_version} | device {self.device} | {gpu} | {dot} | "
            f"{self.cpu_count} CPU core(s) | seed {self.seed}"
            + (" | fast mode" if self.fast else "")
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


def setup(seed: int = 0, *, fast: bool | None = None) -> Env:
    """Seed Python, NumPy and torch, and describe the machine. Introduced in lesson 00.

    `fast` (default: the ACCUMLAB_FAST environment variable) asks lessons for smaller sweeps; the
    relations they assert are the same, only the number of points drawn changes.
    """
    from ._validate import flag
    from ._validate import seed as check_seed

    seed = check_seed("seed", seed)  # numpy takes seeds below 2**32 only
    if fast is not None:
        flag("fast", fast)
    seed_everything(seed)
    from .figures import show_figures_inline

    show_figures_inline()  # plots are pure Figures: make Jupyter draw them, not print "Figure(...)"
    if fast is None:
        fast = os.environ.get("ACCUMLAB_FAST", "") not in ("", "0")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return Env(
        device=torch.device("cuda" if gpus else "cpu"),
        gpu_count=gpus,
        gpu_name=torch.cuda.get_device_name(0) if gpus else None,
        has_dot=has_dot(),
        cpu_count=os.cpu_count() or 1,
        torch_version=torch.__version__,
        seed=seed,
        fast=bool(fast),
    )
