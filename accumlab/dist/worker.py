"""What runs inside each rank: `python -m accumlab.dist.worker SPEC_DIR RANK` (lesson 07).

A task is a plain function `task(ctx, **kwargs) -> picklable` living in an importable module, named
"module:function". The worker joins the process group on 127.0.0.1, runs the task, and writes
`{"ok": True, "result": ...}` or the exception with its traceback to SPEC_DIR/rankR.pt; the
launcher (accumlab.dist.launcher) reads it.
"""

from __future__ import annotations

import datetime
import importlib
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from .backend import Plan


@dataclass
class Context:
    """A rank's view of its group: rank, world size, the backend plan, and a progress line."""

    rank: int
    world_size: int
    local_rank: int
    plan: Plan
    progress_path: Path | None = None
    group: object = None  # the process group for collectives (None: the default group)

    @property
    def ddp_device(self) -> str:
        return self.plan.ddp_device(self.local_rank)

    @property
    def fsdp_device(self) -> str:
        return self.plan.fsdp_device(self.local_rank)

    def step(self, label: str) -> None:
        """Rank 0 reports one finished piece of work (the launcher turns these into a progress bar)."""
        if self.rank == 0 and self.progress_path is not None:
            with open(self.progress_path, "a") as f:
                f.write(label + "\n")


def resolve(task: str):
    """'package.module:function' → the function (ValueError naming `task` when it is not there)."""
    if not isinstance(task, str) or task.count(":") != 1:
        raise ValueError(f"task must look like 'package.module:function', got {task!r}")
    module_name, name = task.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"task {task!r}: cannot import module {module_name!r} ({err})") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"task {task!r}: module {module_name!r} has no function {name!r}")
    return fn


def _exit_with_parent(parent_pid: int) -> None:
    # if the launcher (a notebook kernel, a test) dies, do not linger as an orphan
    def watch():
        while True:
            if os.getppid() != parent_pid:
                os._exit(3)
            time.sleep(0.5)

    threading.Thread(target=watch, daemon=True).start()


def _store(spec_dir: Path, rank: int, world_size: int, timeout_s: float):
    """The group's key-value store on 127.0.0.1. Rank 0 binds it to a port the system picks at
    that moment and publishes the port in SPEC_DIR/port; the other ranks read it there. (A port
    the launcher picked and rank 0 bound seconds later, once torch is imported, could be taken
    meanwhile by any process on the machine: the rendezvous would then fail.)"""
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=timeout_s)
    path = spec_dir / "port"
    if rank == 0:
        store = dist.TCPStore(
            "127.0.0.1", 0, world_size, is_master=True, timeout=timeout, wait_for_workers=False
        )
        path.with_suffix(".tmp").write_text(str(store.port))
        os.replace(path.with_suffix(".tmp"), path)  # the others never read half a number
        return store
    deadline = time.monotonic() + timeout_s
    while not path.exists():  # the launcher stops every rank if rank 0 dies first
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank 0 published no port within {timeout_s:g} s")
        time.sleep(0.02)
    port = int(path.read_text())
    return dist.TCPStore("127.0.0.1", port, world_size, is_master=False, timeout=timeout)


def _init_group(plan: Plan, rank: int, world_size: int, spec_dir: Path, timeout_s: float) -> None:
    import torch
    import torch.distributed as dist

    if plan.ddp_device_type == "cuda":
        torch.cuda.set_device(plan.ddp_device(rank))  # NCCL needs each rank's GPU chosen first
    dist.init_process_group(
        plan.backend,
        store=_store(spec_dir, rank, world_size, timeout_s),
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )


def _local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))


def _write(out: Path, payload: dict) -> None:
    import torch

    torch.save(payload, out.with_suffix(".tmp"))
    os.replace(out.with_suffix(".tmp"), out)  # the launcher never reads a half-written file


def _failed(err: BaseException) -> dict:
    return {
        "ok": False,
        "error": f"{type(err).__name__}: {err}",
        "traceback": traceback.format_exc(),
        "failed_at": time.time(),  # lets the launcher blame the rank that failed first
    }


def _run_task(ctx: Context, job: dict, out: Path) -> None:
    """Run one task and write its report to `out`; after a failure the rank exits at once."""
    try:
        payload = {"ok": True, "result": resolve(job["task"])(ctx, **job["kwargs"])}
    except BaseException as err:  # every failure is reported to the launcher, then the rank exits
        payload = _failed(err)
    _write(out, payload)
    if not payload["ok"]:
        print(payload["traceback"], file=sys.stderr, flush=True)
        os._exit(1)  # skip process-group teardown: the other ranks may be stuck in a collective


def serve(ctx: Context, spec_dir: Path, rank: int, poll: float = 0.02) -> None:
    """Ranks that stay up (`accumlab.dist.Ranks`): run SPEC_DIR/jobN/job.pkl for N = 0, 1, ...
    in turn, each report to SPEC_DIR/jobN/rankR.pt, until SPEC_DIR/stop appears."""
    import pickle

    (spec_dir / f"rank{rank}.ready").touch()
    n = 0
    while not (spec_dir / "stop").exists():
        job_file = spec_dir / f"job{n}" / "job.pkl"  # written whole (os.replace) by the launcher
        if not job_file.exists():
            time.sleep(poll)  # idle between a lesson's cells: a file check every 20 ms
            continue
        ctx.progress_path = job_file.parent / "progress"
        _run_task(ctx, pickle.loads(job_file.read_bytes()), job_file.parent / f"rank{rank}.pt")
        n += 1


def main(argv: list[str] | None = None) -> int:
    import pickle

    spec_dir, rank = Path(argv[0]), int(argv[1])
    spec = pickle.loads((spec_dir / "spec.pkl").read_bytes())
    _exit_with_parent(spec["parent_pid"])
    out = spec_dir / f"rank{rank}.pt"
    try:
        plan = Plan(**spec["plan"])
        if "task" in spec:
            resolve(spec["task"])  # an unimportable task fails before the rendezvous
        # rendezvous only on the loopback interface
        _init_group(plan, rank, plan.world_size, spec_dir, spec["timeout"])
        ctx = Context(rank, plan.world_size, rank, plan, spec_dir / "progress")
    except BaseException as err:
        _write(out, _failed(err))
        print(traceback.format_exc(), file=sys.stderr, flush=True)
        os._exit(1)
    import torch.distributed as dist

    if spec.get("serve"):
        serve(ctx, spec_dir, rank)
        dist.destroy_process_group()
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(0)  # nothing left to run: skip the interpreter's teardown (seconds when busy)
    _run_task(ctx, spec, out)
    dist.destroy_process_group()
    return 0


def under_torchrun() -> bool:
    """True inside a process started by torchrun (it sets RANK, WORLD_SIZE and MASTER_ADDR)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def run_here(task: str, kwargs: dict, *, device: str = "auto", timeout: float = 600.0):
    """Run `task` in THIS process as one rank of a torchrun job; rank 0 gets every rank's result
    (a list), the other ranks get None. Used by `python -m accumlab.dist` under torchrun.

    The plan is chosen from what ALL ranks see: each rank names the GPU it would use, and the
    names are compared (gloo, CPU), so a launcher that shows every process one GPU still gets
    NCCL when the GPUs differ, and gloo when the ranks really share one."""
    import datetime

    import torch
    import torch.distributed as dist

    from .backend import choose_plan, gpu_identity

    fn = resolve(task)
    world_size, rank, local = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"]), _local_rank()
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    gpus = torch.cuda.device_count() if torch.cuda.is_available() and device != "cpu" else 0
    if gpus:
        torch.cuda.set_device(local % gpus)  # before any NCCL communicator is created
    # gloo for CPU tensors (object collectives, the identity exchange), NCCL for CUDA ones
    backend = "cpu:gloo,cuda:nccl" if gpus else "gloo"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    ids = [None] * world_size
    dist.all_gather_object(ids, gpu_identity(local) if gpus else None)
    host = ids[rank].split("/")[0] if ids[rank] else None
    node_ids = [i for i in ids if i is not None and i.split("/")[0] == host] if host else None
    plan = choose_plan(
        world_size,
        gpu_count=gpus,
        device=device,
        ranks_per_node=local_world,
        gpu_ids=node_ids if node_ids and len(node_ids) == local_world else None,
    )
    # ranks sharing a GPU: CUDA collectives must go through gloo, not the default group's NCCL
    group = dist.new_group(backend="gloo") if gpus and plan.backend == "gloo" else None
    ctx = Context(rank, world_size, local, plan, group=group)
    result = fn(ctx, **kwargs)
    gathered = [None] * world_size if rank == 0 else None
    dist.gather_object(result, gathered, dst=0)
    dist.destroy_process_group()
    return gathered


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
