"""How many CPU threads torch should use here, and a block that runs on one (lessons 00+).

torch starts one intra-op thread per CPU its affinity mask allows (`taskset -c 0` gives 1), but a
process often gets less CPU than that: a container's quota (cgroup `cpu.max`: a pod may see every
core of its node and be allowed the time of one), or cores busy with other work, which no setting
shows. A parallel op waits for its slowest thread, so a thread that has to share a core stalls
every op: on this project's 2-core machine with one core busy, lesson 05 took 33 s with 2 threads
and 6 s with 1 (docs/measurements.md, "Threads on a shared or quota-limited CPU").
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

CGROUP = Path("/sys/fs/cgroup")


def affinity_cpus() -> int:
    """CPUs this process may run on (its affinity mask; all cores where there is none)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _v2_quota(directory: Path) -> float | None:
    try:  # "max 100000" (no limit) or "150000 100000": 1.5 CPUs per period
        quota, period = (directory / "cpu.max").read_text().split()
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _v1_quota(directory: Path) -> float | None:
    try:  # cpu.cfs_quota_us is -1 without a limit
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period


def cpu_quota(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = CGROUP) -> float | None:
    """CPUs per scheduling period this process's cgroup (or any cgroup above it) allows, or None
    without a quota. Reads cgroup v2 `cpu.max` and cgroup v1 `cpu.cfs_quota_us`."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2: one hierarchy, mounted at root
            base, read = root, _v2_quota
        elif "cpu" in controllers.split(","):  # cgroup v1: the cpu controller's hierarchy
            base, read = root / controllers, _v1_quota
            if not base.exists():
                base = root / "cpu"
        else:
            continue
        # a limit anywhere above this cgroup applies too; inside a container the path may not
        # exist under the container's own view, so its root is read as well
        directory = base / path.lstrip("/")
        for d in (directory, *directory.parents):
            if d == base.parent:
                break
            quota = read(d)
            if quota is not None:
                quotas.append(quota)
    return min(quotas) if quotas else None


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    reason: str


def choose_threads(environ=None, *, quota=None, affinity=None) -> ThreadChoice:
    """torch's intra-op thread count for this process, and why.

    OMP_NUM_THREADS, when set, wins (a platform or a learner chose). Otherwise the CPUs available
    (the affinity mask, capped by the cgroup quota, rounded down: a thread on a fraction of a CPU
    waits for the rest of it), less one CPU left to the rest of the machine — the Jupyter server,
    the browser drawing the widgets, other work — where there are more than two; on two or fewer,
    one thread: the lessons' models are small, and a second thread sharing a busy core made a
    lesson several times slower, while on an idle core it saved nothing measurable (docs/measurements.md).
    """
    environ = os.environ if environ is None else environ
    given = environ.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return ThreadChoice(int(given), f"OMP_NUM_THREADS={given}")
    affinity = affinity_cpus() if affinity is None else affinity
    quota = cpu_quota() if quota is None else quota
    usable = affinity if quota is None else max(1, min(affinity, math.floor(quota)))
    where = f"{affinity} CPU(s) usable" + ("" if quota is None else f", quota {quota:g} CPU(s)")
    threads = 1 if usable <= 2 else usable - 1
    return ThreadChoice(threads, f"{where}: 1 thread on 2 or fewer, else all but one")


@contextmanager
def one_thread() -> Iterator[None]:
    """Inside the block (or decorated function) torch uses one CPU thread; the previous setting is
    restored afterwards. The lessons' models are tiny: handing each op to a second thread costs more
    than the arithmetic, and on a busy 2-core machine waiting for that thread made runs 10-40x slower.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
