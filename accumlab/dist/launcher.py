"""Start a group of worker processes, wait with a hard timeout, always clean up (lesson 07).

`launch("accumlab.dist.lesson:lesson_task", world_size=2, kwargs={...}, timeout=60)` returns each
rank's result. A rank that raises, crashes or hangs becomes one clear `WorkerFailed` /
`WorkerTimeout` within the timeout, naming the rank that failed first (a rank that died, not the
peer it left waiting), and every process of the launch is stopped before it is raised, its own
grandchildren included; if the launcher itself is killed, a watcher process cleans up instead
(accumlab/_processes.py).
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from .. import _processes
from .._machine import human_bytes, memory_limit
from .._validate import instance, mapping, positive_float, positive_int
from .backend import Plan, choose_plan
from .supervise import DistError, WorkerFailed, WorkerTimeout, failure, read_report, supervise

__all__ = ["DistError", "WorkerFailed", "WorkerTimeout", "launch", "free_port", "task_name"]

PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder holding `accumlab/`
# Measured: a rank that imported torch and joined a gloo group holds about 220 MiB (RSS), more
# once it computes. More ranks than 4 per core only queue for the cores (each collective then
# waits for the slowest), so world sizes past either bound are refused as mistakes.
RANK_BYTES = 300 << 20
RANKS_PER_CORE = 4
MAX_TIMEOUT = 24 * 3600.0  # seconds; a launch is a lesson's experiment, not a week-long job


def max_world_size() -> int:
    """The most ranks `launch` starts on this machine (see RANK_BYTES, RANKS_PER_CORE)."""
    return max(1, min(RANKS_PER_CORE * (os.cpu_count() or 1), memory_limit() // RANK_BYTES))


def check_world_size(world_size) -> int:
    cores = os.cpu_count() or 1
    return positive_int(
        "world_size",
        world_size,
        maximum=max_world_size(),
        why=(
            f"this machine has {cores} CPU core(s) and {human_bytes(memory_limit())} of memory; "
            f"each rank is a process of about {human_bytes(RANK_BYTES)}, and more than "
            f"{RANKS_PER_CORE} ranks per core only wait for each other"
        ),
    )


def check_timeout(timeout) -> float:
    return positive_float(
        "timeout", timeout, maximum=MAX_TIMEOUT, why="a launch is stopped after at most a day"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (a launch does not use one: its
    rank 0 binds the rendezvous port itself, see `worker._store`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def task_name(task) -> str:
    """'module:function' for a function (or that string itself), checked to be importable by a
    fresh process: functions defined in a notebook cell or script `__main__` are refused."""
    if isinstance(task, str):
        from .worker import resolve

        resolve(task)
        return task
    module = getattr(task, "__module__", None)
    qualname = getattr(task, "__qualname__", "")
    if not callable(task) or module is None:
        raise ValueError(f"task must be a function or 'module:function', got {task!r}")
    if module == "__main__" or "<locals>" in qualname or "." in qualname:
        raise ValueError(
            f"task must be a top-level function of an importable module (spawned processes cannot "
            f"import notebook cells or __main__), got {module}.{qualname}"
        )
    return task_name(f"{module}:{qualname}")


def _child_env(world_size: int) -> dict:
    env = dict(os.environ)
    # the workers import the same accumlab as this process, wherever it lives
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PACKAGE_PARENT), env.get("PYTHONPATH")) if p
    )
    # one team of threads per core: more ranks than cores oversubscribe and slow everything down
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // world_size)))
    if sys.platform.startswith("linux") and Path("/sys/class/net/lo").exists():
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo's own connections stay on loopback too
    return env


def launch(
    task,
    world_size: int = 2,
    *,
    kwargs: dict | None = None,
    timeout: float = 120.0,
    device: str = "auto",
    plan: Plan | None = None,
    progress_total: int | None = None,
    desc: str = "ranks working",
) -> list:
    """Run `task(ctx, **kwargs)` on `world_size` fresh processes; return the results by rank.

    Raises WorkerFailed (a rank raised or died) or WorkerTimeout (not done after `timeout`
    seconds); in every case no worker process is left behind. `progress_total` shows a progress
    bar fed by rank 0's `ctx.step(...)` calls. Introduced in lesson 07.
    """
    check_world_size(world_size)
    timeout = check_timeout(timeout)
    name = task_name(task)
    kwargs = mapping("kwargs", kwargs if kwargs is not None else {})
    if progress_total is not None:
        positive_int("progress_total", progress_total)
    instance("desc", desc, str, "a string")
    if plan is None:
        plan = choose_plan(world_size, device=device)
    instance("plan", plan, Plan, "an accumlab.dist.Plan (from al.dist.choose_plan)")
    if plan.world_size != world_size:
        raise ValueError(f"plan is for {plan.world_size} ranks but world_size={world_size}")
    spec = {
        "task": name,
        "kwargs": kwargs,
        "plan": plan.as_dict(),
        "timeout": timeout,
        "parent_pid": os.getpid(),
    }
    try:
        payload = pickle.dumps(spec)
    except Exception as err:  # a lambda, a notebook object: checked before any process starts
        raise ValueError(
            f"kwargs must be picklable to reach the worker processes; {type(err).__name__}: {err}"
        ) from None
    with tempfile.TemporaryDirectory(prefix="accumlab-dist-") as tmp:
        spec_dir = Path(tmp)
        token = uuid.uuid4().hex
        env = {**_child_env(world_size), _processes.MARK: token}
        watcher = _processes.start_watcher(token, spec_dir, env)  # cleans up if we are killed
        try:
            (spec_dir / "spec.pkl").write_bytes(payload)
            _run_group(name, world_size, timeout, spec_dir, env, token, progress_total, desc)
            return [_result(spec_dir, r, world_size, name) for r in range(world_size)]
        finally:
            _processes.release_watcher(watcher)


def _run_group(name, world_size, timeout, spec_dir, env, token, progress_total, desc) -> None:
    procs = start_ranks(world_size, spec_dir, env)
    try:
        # one-shot: every rank exits 0 once its result is written
        supervise(
            procs, lambda codes: all(c == 0 for c in codes), job_dir=spec_dir, log_dir=spec_dir,
            task=name, timeout=timeout, progress_total=progress_total, desc=desc,
        )  # fmt: skip
    finally:
        _processes.stop(procs, token)  # also on success: nothing outlives the launch


def start_ranks(world_size: int, spec_dir: Path, env: dict) -> list[subprocess.Popen]:
    """One `python -m accumlab.dist.worker SPEC_DIR RANK` per rank, output to SPEC_DIR/rankR.log."""
    procs: list[subprocess.Popen] = []
    for rank in range(world_size):
        with open(spec_dir / f"rank{rank}.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "accumlab.dist.worker", str(spec_dir), str(rank)],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # its own process group: killed as a whole
                )
            )
    return procs


def _result(spec_dir: Path, rank: int, world_size: int, task: str):
    report = read_report(spec_dir, rank)
    if report is None or not report.get("ok"):
        raise failure(spec_dir, rank, 0, None, world_size, task)
    return report["result"]
