"""Watching launched ranks until their work is done, a rank fails, or time runs out (lesson 07).

Shared by `launch` (one task, then the ranks exit) and `Ranks` (ranks that stay up and run one
task after another). A rank that raises, crashes or hangs becomes one clear `WorkerFailed` /
`WorkerTimeout` naming the rank that failed first (a rank that died, not the peer it left waiting);
the caller then stops every process.

Each task's reports lie in a job folder (`rank{R}.pt`, written whole by the worker, and `progress`,
one line per `ctx.step`); every rank's output goes to `rank{R}.log` in the launch's own folder.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path


class DistError(RuntimeError):
    """A launched group did not finish: the message names the rank and what happened."""


class WorkerFailed(DistError):
    """A rank raised an exception or died."""


class WorkerTimeout(DistError):
    """The group ran past its timeout (typically a rank waiting in a collective)."""


def tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return ""
    return "\n".join(text[-lines:])


def read_report(job_dir: Path, rank: int) -> dict | None:
    """What rank `rank` wrote for this job (None while it has written nothing)."""
    import torch

    try:
        return torch.load(job_dir / f"rank{rank}.pt", weights_only=False)
    except FileNotFoundError:
        return None


def how(code: int | None) -> str:
    if code is None:
        return "was still running"
    if code < 0:
        try:
            return f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def root_failure(procs, exited_at, job_dir, log_dir, world_size: int, task: str, grace=3.0):
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
    if not failed:  # reported failures whose ranks have not exited yet
        failed = [
            r for r in range(len(procs)) if (read_report(job_dir, r) or {}).get("ok") is False
        ]
    reports = {r: read_report(job_dir, r) for r in failed}
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
        f"rank {r} then {how(procs[r].poll())}"
        + (f": {reports[r]['error'][:160]}" if reports[r] and "error" in reports[r] else "")
        for r in ranked[1:]
    ]
    return failure(log_dir, rank, procs[rank].poll(), reports[rank], world_size, task, others)


def failure(log_dir, rank, code, report, world_size, task, others=()) -> WorkerFailed:
    after = "".join(f"\n  ({line})" for line in others)
    stopped = f"all {world_size} worker processes were stopped."
    if report is not None and "error" not in report:  # saved its result, then failed in teardown
        return WorkerFailed(
            f"rank {rank} of {world_size} finished its task, then {how(code)} (task {task}); "
            f"{stopped}{after}"
        )
    if report is not None:
        return WorkerFailed(
            f"rank {rank} of {world_size} raised {report['error']} (task {task}); {stopped}"
            f"{after}\n\nTraceback in rank {rank}:\n"
            + "\n".join(report["traceback"].strip().splitlines()[-8:])
        )
    log = tail(Path(log_dir) / f"rank{rank}.log")
    return WorkerFailed(
        f"rank {rank} of {world_size} {how(code)} without reporting a result (task {task}); "
        f"{stopped}{after}" + (f"\n\nLast output of rank {rank}:\n{log}" if log else "")
    )


def _progress(job_dir: Path) -> int:
    try:
        return len((job_dir / "progress").read_text().splitlines())
    except FileNotFoundError:
        return 0


def supervise(
    procs,
    done: Callable[[list], bool],
    *,
    job_dir: Path,
    log_dir: Path,
    task: str,
    timeout: float,
    progress_total: int | None = None,
    desc: str = "ranks working",
    what: str = "finish",
) -> None:
    """Return once `done(exit_codes)` holds; raise WorkerFailed as soon as a rank exits with an
    error (the root cause, see `root_failure`) and WorkerTimeout after `timeout` seconds. The
    caller stops the processes in every case."""
    world_size = len(procs)
    exited_at: dict[int, float] = {}  # when the launcher first saw each rank gone
    bar = None
    if progress_total:
        from tqdm.auto import tqdm

        bar = tqdm(total=progress_total, desc=desc, leave=False)
    try:
        deadline = time.monotonic() + timeout
        while True:
            codes = [p.poll() for p in procs]
            for r, code in enumerate(codes):
                if code is not None:
                    exited_at.setdefault(r, time.time())
            if any(code not in (None, 0) for code in codes):
                raise root_failure(procs, exited_at, job_dir, log_dir, world_size, task)
            if done(codes):
                break
            if time.monotonic() > deadline:
                running = [r for r, c in enumerate(codes) if c is None]
                tails = {r: tail(Path(log_dir) / f"rank{r}.log", 4) for r in running}
                logs = "\n".join(f"--- rank {r}:\n{t}" for r, t in tails.items() if t)
                raise WorkerTimeout(
                    f"task {task} did not {what} within {timeout:g} s: rank(s) {running} of "
                    f"{world_size} still running (a rank waiting in a collective that another "
                    f"rank never joins hangs like this). All worker processes were stopped."
                    + (f"\n\nLast output:\n{logs}" if logs else "")
                )
            if bar is not None:
                bar.update(_progress(job_dir) - bar.n)
            time.sleep(0.05)
        if bar is not None:
            bar.update(progress_total - bar.n)
    finally:
        if bar is not None:
            bar.close()
