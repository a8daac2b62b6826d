"""Runs bad-input cases in a worker process and says what each one did (tests/test_fuzz_api.py).

A case is one call with a bad argument. The worker runs it under an address-space limit (a huge
allocation fails at once instead of swapping) and the parent gives it a time limit (a case still
running after it is a hang: the worker is killed and a fresh one serves the next case). Verdicts:

    clear    ValueError/TypeError raised by accumlab's own code, naming every expected word
             (or, for a command line, exit status 2 with those words in the usage message)
    handled  the call returned, and the case's `ok(result)` says that result is the right one
    silent   the call returned although it should have refused (or `ok` said the result is wrong)
    refused  a `handled` case raised instead of returning its right answer (a valid input refused,
             or a numpy integer that reached torch as one)
    leak     any other exception, or one raised inside torch/matplotlib/Python's own libraries
             instead of accumlab (a deep traceback), or MemoryError
    vague    a ValueError/TypeError in accumlab's words that does not name what is wrong
    hang     still running after the time limit
    crash    the worker process died

Run every case of a table and print the counts:  python tests/fuzz_harness.py tests/test_fuzz_api.py
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PASS = ("clear", "handled")
ADDRESS_SPACE = 4 << 30  # bytes: `import torch` + matplotlib take ~0.8 GB of address space here
CASE_SECONDS = 15.0  # far above any case's real time (milliseconds); only a hang gets near it


@dataclass(frozen=True)
class Case:
    target: str  # the public name as reached from `al`: "run", "Data.to", "dist.launch"
    label: str  # what is bad about the input
    call: Callable[[], object] = field(repr=False)
    words: tuple[str, ...] = ()  # each must appear in the message (the parameter, the value)
    ok: Callable[[object], bool] | None = field(default=None, repr=False)
    no_processes: bool = False  # refuse to start a process: validation must stop it first
    seconds: float = CASE_SECONDS
    slow: bool = False  # pytest marks it slow: it starts processes or takes over a second

    @property
    def id(self) -> str:
        return f"{self.target}: {self.label}"


def bad(target: str, label: str, call, *words: str, **options) -> Case:
    """`call()` must raise a ValueError/TypeError in accumlab's words containing every word."""
    return Case(target, label, call, tuple(words), **options)


def handled(target: str, label: str, call, ok, **options) -> Case:
    """`call()` must return a result for which `ok(result)` is true."""
    return Case(target, label, call, ok=ok, **options)


# --- inside the worker ----------------------------------------------------------------------------


class _Spawned(BaseException):
    """A case marked no_processes tried to start a process."""


def _raised_in(err: BaseException) -> str:
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename if tb is not None else "?"


def _accumlab_dir() -> str:
    import accumlab

    return str(Path(accumlab.__file__).resolve().parent) + os.sep


def verdict(case: Case) -> dict:
    """Run one case here and classify what it did."""
    stderr = io.StringIO()
    real_popen = subprocess.Popen

    def refuse(*args, **kwargs):
        raise _Spawned(f"started a process: {args[0] if args else kwargs.get('args')}")

    if case.no_processes:
        subprocess.Popen = refuse
    try:
        with contextlib.redirect_stderr(stderr), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = case.call()
    except SystemExit as err:
        said = stderr.getvalue().strip().splitlines()
        text = said[-1] if said else ""
        if err.code != 2:
            return {"verdict": "leak", "detail": f"exit status {err.code}: {text}"}
        missing = [w for w in case.words if w not in stderr.getvalue()]
        if missing:
            return {"verdict": "vague", "detail": f"usage error without {missing}: {text}"}
        return {"verdict": "clear", "detail": text}
    except _Spawned as err:
        return {"verdict": "silent", "detail": f"accepted the input and {err}"}
    except BaseException as err:  # noqa: BLE001 - classifying every exception is the point
        if isinstance(err, KeyboardInterrupt):
            raise
        where = _raised_in(err)
        text = f"{type(err).__name__}: {err}"[:400]
        if case.ok is not None:  # a `handled` case has a right answer: any exception misses it
            return {"verdict": "refused", "detail": f"{text}  (raised in {where})"}
        if not isinstance(err, (ValueError, TypeError)):
            return {"verdict": "leak", "detail": f"{text}  (raised in {where})"}
        if not os.path.realpath(where).startswith(_accumlab_dir()):
            return {"verdict": "leak", "detail": f"{text}  (raised in {where})"}
        missing = [w for w in case.words if w not in str(err)]
        if missing:
            return {"verdict": "vague", "detail": f"message lacks {missing}: {text}"}
        return {"verdict": "clear", "detail": text}
    finally:
        subprocess.Popen = real_popen
    if case.ok is not None:
        try:
            right = bool(case.ok(result))
        except Exception as err:  # noqa: BLE001
            right, result = False, f"{result!r} (ok() raised {err!r})"
        if right:
            return {"verdict": "handled", "detail": repr(result)[:200]}
    warned = "; ".join(str(w.message)[:120] for w in caught)
    return {
        "verdict": "silent",
        "detail": f"returned {repr(result)[:200]}" + (f" (warnings: {warned})" if warned else ""),
    }


def load_cases(table: str) -> dict[str, Case]:
    spec = importlib.util.spec_from_file_location("fuzz_table", table)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_table"] = module
    spec.loader.exec_module(module)
    cases = {}
    for case in module.CASES:
        if case.id in cases:
            raise ValueError(f"two cases share the id {case.id!r}")
        cases[case.id] = case
    return cases


def serve(table: str) -> None:
    """Worker loop: read a case id per line on stdin, write its verdict as a JSON line."""
    results = os.fdopen(os.dup(1), "w", buffering=1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # whatever a case prints (to fd 1, even from C) goes nowhere
    os.dup2(quiet, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    cases = load_cases(table)
    import matplotlib.figure  # noqa: F401  - warm the big imports before the first case
    import torch  # noqa: F401

    import accumlab as al

    al.run(al.Recipe(2), al.mlp(), al.regression_data(4))
    results.write("ready\n")
    for line in sys.stdin:
        results.write(json.dumps(verdict(cases[line.rstrip("\n")])) + "\n")


# --- in the test process --------------------------------------------------------------------------


def _limit_address_space() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


class Worker:
    """A worker process serving the cases of `table`; restarted after a hang or a crash."""

    def __init__(self, table: str, env: dict | None = None):
        self.table = str(table)
        self.env = env
        self.proc: subprocess.Popen | None = None
        self._buffer = b""

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", self.table],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            preexec_fn=_limit_address_space,
            start_new_session=True,  # its own process group: a hung case is killed with its children
            env=self.env,
        )
        self._buffer = b""
        if self._line(120.0) != "ready":
            self.close()
            raise RuntimeError("the fuzz worker did not start")

    def _line(self, seconds: float) -> str | None:
        deadline = time.monotonic() + seconds
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def ask(self, case: Case) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write((case.id + "\n").encode())
        self.proc.stdin.flush()
        t0 = time.monotonic()
        line = self._line(case.seconds)
        if line is not None:
            return json.loads(line)
        code = self.proc.poll()
        self.close()
        if code is None:
            return {"verdict": "hang", "detail": f"still running after {case.seconds:g} s"}
        return {
            "verdict": "crash",
            "detail": f"worker died (status {code}) after {time.monotonic() - t0:.1f} s",
        }

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        self.proc = None


def summary(table: str) -> Counter:
    """Run every case of `table` and print each failure and the counts per verdict."""
    cases = load_cases(table)
    worker = Worker(table)
    counts: Counter = Counter()
    try:
        for case in cases.values():
            v = worker.ask(case)
            counts[v["verdict"]] += 1
            if v["verdict"] not in PASS:
                print(f"{v['verdict']:7} {case.id}\n        {v['detail']}")
    finally:
        worker.close()
    print(f"{len(cases)} cases: " + ", ".join(f"{k} {n}" for k, n in counts.most_common()))
    return counts


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        sys.path.insert(0, str(Path(__file__).parent))
        serve(sys.argv[2])
    else:
        try:
            summary(sys.argv[1])
        except Exception:
            traceback.print_exc()
            sys.exit(1)
