"""Start a group of worker processes, wait with a hard timeout, always clean up (lesson 07).

`launch("accumlab.dist.lesson:lesson_task", world_size=2, kwargs={...}, timeout=60)` returns each
rank's result. A rank that raises, crashes or hangs becomes one clear `WorkerFailed` /
`WorkerTimeout` within the timeout, and every worker process is stopped before it is raised.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .._validate import positive_float, positive_int
from .backend import Plan, choose_plan

PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder holding `accumlab/`


class DistError(RuntimeError):
    """A launched group did not finish: the message names the rank and what happened."""


class WorkerFailed(DistError):
    """A rank raised an exception or died."""


class WorkerTimeout(DistError):
    """The group ran past its timeout (typically a rank waiting in a collective)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
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


def _stop(procs: list[subprocess.Popen], grace: float = 2.0) -> None:
    """Terminate each worker's whole process group, kill what ignores it, reap everything."""

    def signal_all(sig):
        for p in procs:
            try:
                if os.name == "posix":
                    os.killpg(p.pid, sig)  # start_new_session=True made pid the group id
                elif p.poll() is None:
                    p.kill()
            except (ProcessLookupError, PermissionError):
                pass

    if any(p.poll() is None for p in procs):
        signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.02)
    signal_all(signal.SIGKILL if os.name == "posix" else signal.SIGTERM)
    for p in procs:
        p.wait()


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return ""
    return "\n".join(text[-lines:])


def _failed_at(spec_dir: Path, rank: int) -> float:
    import torch

    result = spec_dir / f"rank{rank}.pt"
    if not result.exists():
        return float("inf")  # died without a report: a crash, timed by nothing we can read
    return torch.load(result, weights_only=False).get("failed_at", float("inf"))


def _root_failure(procs, spec_dir: Path, world_size: int, task: str, grace: float = 3.0):
    """The failure to report: when one rank raises, its peers fail moments later inside a
    collective ("connection closed by peer"). Wait briefly for them, then blame the earliest."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.02)
    failed = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
    rank = min(failed, key=lambda r: (_failed_at(spec_dir, r), r))
    return _failure(spec_dir, rank, procs[rank].poll(), world_size, task)


def _failure(spec_dir: Path, rank: int, code: int, world_size: int, task: str) -> WorkerFailed:
    import torch

    result = spec_dir / f"rank{rank}.pt"
    if result.exists():
        payload = torch.load(result, weights_only=False)
        return WorkerFailed(
            f"rank {rank} of {world_size} raised {payload['error']} (task {task}); all "
            f"{world_size} worker processes were stopped.\n\nTraceback in rank {rank}:\n"
            + "\n".join(payload["traceback"].strip().splitlines()[-8:])
        )
    how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
    return WorkerFailed(
        f"rank {rank} of {world_size} {how} without reporting a result (task {task}); all "
        f"{world_size} worker processes were stopped.\n\nLast output of rank {rank}:\n"
        + _tail(spec_dir / f"rank{rank}.log")
    )


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
    positive_int("world_size", world_size)
    timeout = positive_float("timeout", timeout)
    name = task_name(task)
    kwargs = dict(kwargs or {})
    plan = plan or choose_plan(world_size, device=device)
    if plan.world_size != world_size:
        raise ValueError(f"plan is for {plan.world_size} ranks but world_size={world_size}")
    with tempfile.TemporaryDirectory(prefix="accumlab-dist-") as tmp:
        spec_dir = Path(tmp)
        spec = {
            "task": name,
            "kwargs": kwargs,
            "plan": plan.as_dict(),
            "port": free_port(),
            "timeout": timeout,
            "parent_pid": os.getpid(),
        }
        (spec_dir / "spec.pkl").write_bytes(pickle.dumps(spec))
        env = _child_env(world_size)
        procs: list[subprocess.Popen] = []
        bar = None
        try:
            for rank in range(world_size):
                with open(spec_dir / f"rank{rank}.log", "wb") as log:
                    procs.append(
                        subprocess.Popen(
                            [
                                sys.executable,
                                "-m",
                                "accumlab.dist.worker",
                                str(spec_dir),
                                str(rank),
                            ],
                            env=env,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL,
                            start_new_session=True,  # its own process group: killed as a whole
                        )
                    )
            if progress_total:
                from tqdm.auto import tqdm

                bar = tqdm(total=progress_total, desc=desc, leave=False)
            deadline = time.monotonic() + timeout
            while True:
                codes = [p.poll() for p in procs]
                if any(code not in (None, 0) for code in codes):
                    raise _root_failure(procs, spec_dir, world_size, name)
                if all(c == 0 for c in codes):
                    break
                if time.monotonic() > deadline:
                    running = [r for r, c in enumerate(codes) if c is None]
                    tails = {r: _tail(spec_dir / f"rank{r}.log", 4) for r in running}
                    logs = "\n".join(f"--- rank {r}:\n{t}" for r, t in tails.items() if t)
                    raise WorkerTimeout(
                        f"task {name} did not finish within {timeout:g} s: rank(s) {running} of "
                        f"{world_size} still running (a rank waiting in a collective that another "
                        f"rank never joins hangs like this). All worker processes were stopped."
                        + (f"\n\nLast output:\n{logs}" if logs else "")
                    )
                if bar is not None:
                    done = _progress(spec_dir)
                    bar.update(done - bar.n)
                time.sleep(0.05)
            if bar is not None:
                bar.update(progress_total - bar.n)
        finally:
            if bar is not None:
                bar.close()
            _stop(procs)  # also on success: nothing outlives the launch, whatever happened
        import torch

        return [
            torch.load(spec_dir / f"rank{r}.pt", weights_only=False)["result"]
            for r in range(world_size)
        ]


def _progress(spec_dir: Path) -> int:
    try:
        return len((spec_dir / "progress").read_text().splitlines())
    except FileNotFoundError:
        return 0
