"""Stopping every process a launch started, grandchildren included, even if the launcher is killed.

Each worker's process group is killed as a whole, but a grandchild that starts its own session
(`start_new_session=True`, `setsid`, a daemon) leaves that group, and once its parent exits it
is no longer anyone's child either. What it keeps is its environment: every process of a launch
inherits `MARK=<token>`, and on Linux `/proc/PID/environ` shows it (the same technique as
Jenkins' ProcessTreeKiller), so `stop` finds and kills them by that mark, plus any descendant
still found by parent id. Only processes carrying this launch's token are touched.

A launcher killed with SIGKILL runs no clean-up code at all. For that case a small watcher
process (`python -m accumlab._processes watch TOKEN FOLDER`, in its own session) holds the read
end of a pipe from the launcher: when the launcher ends, for whatever reason, the pipe closes,
and the watcher kills what carries the token and removes the launch's temporary folder.
Not covered: a descendant that clears its environment AND outlives its parent; and on systems
without /proc (macOS) only the process groups are killed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

MARK = "ACCUMLAB_LAUNCH"
PROC = Path("/proc")


def _environ_has(pid: int, entry: bytes) -> bool:
    try:
        return entry in (PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:  # gone, or not ours to read
        return False


def _parent_ids() -> dict[int, int]:
    parents = {}
    for d in PROC.glob("[0-9]*"):
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # the command name (field 2) may hold spaces and parentheses: split after the last ')'
        parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def marked(token: str, roots: list[int] = ()) -> set[int]:
    """Processes carrying this launch's token, and every descendant of `roots` (Linux only)."""
    if not PROC.is_dir():
        return set()
    me, entry = os.getpid(), f"{MARK}={token}".encode()
    parents = _parent_ids()
    found = {pid for pid in parents if pid != me and _environ_has(pid, entry)}
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found and child != me:
                found.add(child)
                stack.append(child)
    return found - set(roots)


def _signal(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop(procs: list[subprocess.Popen], token: str | None, grace: float = 2.0) -> None:
    """Terminate each worker's process group and every process of the launch (by token), kill
    what ignores it after `grace` seconds, and reap the workers."""

    def signal_all(sig, others):
        for p in procs:
            try:
                if os.name == "posix":
                    os.killpg(p.pid, sig)  # start_new_session=True made pid the group id
                elif p.poll() is None:
                    p.kill()
            except (ProcessLookupError, PermissionError):
                pass
        _signal(others, sig)

    roots = [p.pid for p in procs if p.poll() is None]
    others = marked(token, roots) if token else set()
    if roots or others:
        signal_all(signal.SIGTERM, others)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (
            any(p.poll() is None for p in procs) or any(_alive(pid) for pid in others)
        ):
            time.sleep(0.02)
    kill = signal.SIGKILL if os.name == "posix" else signal.SIGTERM
    signal_all(kill, others | (marked(token) if token else set()))
    for p in procs:
        p.wait()


def _alive(pid: int) -> bool:
    try:
        state = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie is dead, only not yet reaped by its (new) parent


def start_watcher(token: str, folder: Path, env: dict) -> subprocess.Popen:
    """The watcher for a launch (see the module docstring); close its stdin to release it."""
    env = {k: v for k, v in env.items() if k != MARK}  # it must not carry the token it kills
    return subprocess.Popen(
        [sys.executable, "-m", "accumlab._processes", "watch", token, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C or a kill of the launcher's group does not reach it
        env=env,
    )


def release_watcher(watcher: subprocess.Popen) -> None:
    try:
        watcher.stdin.close()  # end of file: the watcher cleans what is left, then exits
        watcher.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        watcher.kill()
        watcher.wait()


def watch(token: str, folder: str) -> None:
    sys.stdin.buffer.read()  # returns when the launcher closes the pipe or dies
    pids = marked(token)
    _signal(pids, signal.SIGTERM)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    _signal(marked(token), signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__" and sys.argv[1:2] == ["watch"]:
    watch(sys.argv[2], sys.argv[3])
