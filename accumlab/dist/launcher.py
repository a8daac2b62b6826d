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
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from .. import _processes
from .._machine import human_bytes, memory_limit
from .._validate import instance, mapping, positive_float, positive_int
from .backend import Plan, choose_plan

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


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return ""
    return "\n".join(text[-lines:])


def _report(spec_dir: Path, rank: int) -> dict | None:
    import torch

    path = spec_dir / f"rank{rank}.pt"
    try:
        return torch.load(path, weights_only=False)
    except FileNotFoundError:
        return None


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _root_failure(procs, exited_at, spec_dir: Path, world_size: int, task: str, grace=3.0):
    """The failure to report. A rank that dies (exits, segfaults) takes no report with it, and its
    peers then fail inside a collective ("connection closed by peer") and DO report, moments
    later: the rank without a report is the cause. Among ranks that all reported, the earliest
    failure is; and a report more than a second older than the first death wins (a peer that
    raised, then a rank aborted by its backend)."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.02)
    now = time.time()
    failed = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
    reports = {r: _report(spec_dir, r) for r in failed}
    # when each failure happened: the report's own clock, or when the launcher saw the rank gone
    when = {
        r: reports[r].get("failed_at", now) if reports[r] else exited_at.get(r, now) for r in failed
    }
    died = [when[r] for r in failed if reports[r] is None]
    raised = [when[r] for r in failed if reports[r] is not None]
    raise_first = bool(died and raised and min(raised) < min(died) - 1.0)

    def order(r):
        return ((reports[r] is None) == raise_first, when[r], r)

    ranked = sorted(failed, key=order)
    rank = ranked[0]
    others = [
        f"rank {r} then {_how(procs[r].poll())}"
        + (f": {reports[r]['error'][:160]}" if reports[r] and "error" in reports[r] else "")
        for r in ranked[1:]
    ]
    return _failure(spec_dir, rank, procs[rank].poll(), reports[rank], world_size, task, others)


def _failure(spec_dir, rank, code, report, world_size, task, others=()) -> WorkerFailed:
    after = "".join(f"\n  ({line})" for line in others)
    stopped = f"all {world_size} worker processes were stopped."
    if report is not None and "error" not in report:  # saved its result, then failed in teardown
        return WorkerFailed(
            f"rank {rank} of {world_size} finished its task, then {_how(code)} (task {task}); "
            f"{stopped}{after}"
        )
    if report is not None:
        return WorkerFailed(
            f"rank {rank} of {world_size} raised {report['error']} (task {task}); {stopped}"
            f"{after}\n\nTraceback in rank {rank}:\n"
            + "\n".join(report["traceback"].strip().splitlines()[-8:])
        )
    log = _tail(spec_dir / f"rank{rank}.log")
    return WorkerFailed(
        f"rank {rank} of {world_size} {_how(code)} without reporting a result (task {task}); "
        f"{stopped}{after}" + (f"\n\nLast output of rank {rank}:\n{log}" if log else "")
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
        "port": free_port(),
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
    procs: list[subprocess.Popen] = []
    exited_at: dict[int, float] = {}  # when the launcher first saw each rank gone
    bar = None
    try:
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
        if progress_total:
            from tqdm.auto import tqdm

            bar = tqdm(total=progress_total, desc=desc, leave=False)
        deadline = time.monotonic() + timeout
        while True:
            codes = [p.poll() for p in procs]
            for r, code in enumerate(codes):
                if code is not None:
                    exited_at.setdefault(r, time.time())
            if any(code not in (None, 0) for code in codes):
                raise _root_failure(procs, exited_at, spec_dir, world_size, name)
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
                bar.update(_progress(spec_dir) - bar.n)
            time.sleep(0.05)
        if bar is not None:
            bar.update(progress_total - bar.n)
    finally:
        if bar is not None:
            bar.close()
        # also on success: nothing outlives the launch, grandchildren included
        _processes.stop(procs, token)


def _result(spec_dir: Path, rank: int, world_size: int, task: str):
    report = _report(spec_dir, rank)
    if report is None or not report.get("ok"):
        raise _failure(spec_dir, rank, 0, None, world_size, task)
    return report["result"]


def _progress(spec_dir: Path) -> int:
    try:
        return len((spec_dir / "progress").read_text().splitlines())
    except FileNotFoundError:
        return 0
