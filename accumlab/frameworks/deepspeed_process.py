"""Lesson 11: DeepSpeed on the CPU as one gloo process, also on a machine with a GPU.

DeepSpeed chooses its accelerator once per process and keeps it; these contexts make it the CPU for
the lesson's runs and put back what they change (the environment, an accelerator chosen before,
or none chosen, and no process group left behind).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from contextlib import contextmanager


@contextmanager
def cpu_accelerator():
    """DeepSpeed on the CPU for whatever runs inside, also on a machine with a GPU.

        DeepSpeed picks its accelerator on its first `get_accelerator()` call, which `import
        deepspeed` makes, and keeps it for the process (deepspeed/accelerator/real_accelerator.py);
        `DS_ACCELERATOR=cpu` in the environment at that moment makes it the CPU. Every lesson run is
        made inside this context, so whichever run imports deepspeed first (the Trainer's does:
        accelerate's `unwrap_model`) starts it on the CPU. Where deepspeed was imported earlier with
        another accelerator, the CPU one is set for the run (`set_accelerator`, DeepSpeed's own
        switch) and the earlier one put back afterwards, as is the environment; where none was chosen
    before, none is chosen after, so that DeepSpeed outside the lesson's runs detects a GPU."""
    saved = os.environ.get("DS_ACCELERATOR")
    os.environ["DS_ACCELERATOR"] = "cpu"
    chosen = sys.modules.get("deepspeed.accelerator.real_accelerator")
    previous = None if chosen is None else chosen.ds_accelerator
    unchosen = previous is None  # none chosen yet: after the run, none chosen again
    if previous is not None and previous.device_name() != "cpu":
        from deepspeed.accelerator.cpu_accelerator import CPU_Accelerator

        chosen.set_accelerator(CPU_Accelerator())
    else:
        previous = None  # nothing to put back
    try:
        yield
    finally:
        if previous is not None:
            chosen.set_accelerator(previous)
        elif unchosen and "deepspeed.accelerator.real_accelerator" in sys.modules:
            # the run chose the CPU; the learner's next get_accelerator() detects afresh (a GPU)
            sys.modules["deepspeed.accelerator.real_accelerator"].ds_accelerator = None
        if saved is None:
            os.environ.pop("DS_ACCELERATOR", None)
        else:
            os.environ["DS_ACCELERATOR"] = saved


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def one_process_group():
    """DeepSpeed on the CPU as one gloo process, for the run inside only. A group made here is
    destroyed when the run ends, through DeepSpeed's own `deepspeed.comm.destroy_process_group`,
    which also drops the groups DeepSpeed cloned from it (deepspeed/utils/groups.py): a later
    `deepspeed.initialize` in the kernel, on a GPU too, makes its own (NCCL) group instead of
    finding this gloo one. A group that existed before is left as it was. The environment
    variables are put back after each run, so Accelerate and the Trainer see one plain process."""
    import torch.distributed as dist

    made_here = not dist.is_initialized()
    if not made_here and dist.get_world_size() != 1:
        raise ValueError(
            f"a torch.distributed process group of {dist.get_world_size()} processes exists in "
            "this process: the lesson's DeepSpeed runs need one process"
        )
    env = {
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
        with cpu_accelerator():
            import deepspeed
            from deepspeed.accelerator import get_accelerator

            logger.setLevel(logging.ERROR)  # its INFO lines (config dumps) would flood the cell
            device = get_accelerator().device_name()
            if device != "cpu":
                raise ValueError(
                    f"deepspeed was imported with the {device!r} accelerator before this run; the "
                    "lesson's runs need DS_ACCELERATOR=cpu set before its first import (restart "
                    "the kernel)"
                )
            # One process reduces nothing through shared memory, and this op is C++ that
            # DeepSpeed would compile on first use (minutes on a 2-core CPU): mark it
            # unavailable, as DeepSpeed itself does on platforms without it (deepspeed/ops/
            # __init__.py keeps this dict for edits). Reading the dict the first time probes
            # every op by compiling test programs; their linker errors ("cannot find -laio")
            # would reach the notebook, past DeepSpeed's own redirect, in a Jupyter kernel.
            with _stderr_file_silenced():
                compatible = deepspeed.ops.__compatible_ops__
            compatible["deepspeed_shm_comm"] = False
            deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False)
            try:
                yield deepspeed
            finally:
                if made_here and dist.is_initialized():
                    deepspeed.comm.destroy_process_group()
    finally:
        logger.setLevel(level)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _stderr_file_silenced():
    """File descriptor 2 to /dev/null inside: what compiler subprocesses write there."""
    try:
        fd = sys.__stderr__.fileno()
    except (AttributeError, OSError, ValueError):  # no real stderr (an embedded interpreter)
        yield
        return
    saved = os.dup(fd)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), fd)
        try:
            yield
        finally:
            os.dup2(saved, fd)
            os.close(saved)
