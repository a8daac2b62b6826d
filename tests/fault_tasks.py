"""Tasks that fail the way real ranks fail, for the launcher fault scenarios in test_fuzz_api.py.

The launched workers import this module by name: the tests put tests/ on their PYTHONPATH.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time


def exit_on_rank(ctx, *, rank: int = 1, code: int = 7):
    """Rank `rank` exits at once, reporting nothing; the others wait for it in a barrier."""
    import torch.distributed as dist

    if ctx.rank == rank:
        os._exit(code)
    dist.barrier()
    return ctx.rank


def segfault_on_rank(ctx, *, rank: int = 1):
    """Rank `rank` dereferences a null pointer (SIGSEGV); the others wait in a barrier."""
    import torch.distributed as dist

    if ctx.rank == rank:
        ctypes.string_at(0)
    dist.barrier()
    return ctx.rank


def grandchild(ctx, *, pid_file: str, then: str = "return"):
    """Rank 0 starts a process in its own session (it leaves the worker's process group, as a
    daemon or `setsid` would) and writes its pid to `pid_file`; then every rank returns, or
    rank 1 raises."""
    import torch.distributed as dist

    if ctx.rank == 0:
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
        )
        with open(pid_file, "w") as f:
            f.write(str(child.pid))
    dist.barrier()
    if then == "raise" and ctx.rank == 1:
        raise RuntimeError("rank 1 fails after the grandchild started")
    time.sleep(0.1)
    return ctx.rank


def exit_after_result(ctx, *, rank: int = 1, code: int = 3):
    """Rank `rank` returns its result (the worker saves it), then its process exits with `code`
    half a second later, as a crash in teardown would."""
    import threading

    if ctx.rank == rank:
        threading.Timer(0.5, os._exit, (code,)).start()
    return ctx.rank
