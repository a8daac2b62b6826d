"""Ranks that stay up between experiments: start once, run one task after another (lesson 07).

Starting ranks costs seconds (each process imports PyTorch and joins the group); an experiment on
them takes a fraction of that. A lesson wants each experiment to run right after the learner has
predicted its result, sections apart, so `Ranks(2)` starts the processes and returns at once
(they start in the background), `ranks.run(task, kwargs)` runs one task on every rank and returns
their results, and `ranks.close()` stops them (so does dropping the object, or the interpreter
exiting). A rank that raises, dies or hangs ends the group as in `launch`: one clear
`WorkerFailed` / `WorkerTimeout`, every process stopped; later runs then say so.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import time
import uuid
import weakref
from pathlib import Path

from .. import _processes
from .._validate import instance, mapping, positive_int
from .backend import Plan, choose_plan
from .launcher import _child_env, check_timeout, check_world_size, start_ranks, task_name
from .supervise import DistError, read_report, root_failure, supervise

START_TIMEOUT = 300.0  # seconds for every rank to import torch and join: minutes on a busy machine
GROUP_TIMEOUT = 3600.0  # the process group's own limit on one collective (runs have shorter ones)


def _shutdown(state: dict) -> None:
    """Stop the ranks (politely first: SPEC_DIR/stop ends their loop), then clean up."""
    procs, spec_dir = state.pop("procs", []), state["spec_dir"]
    if procs and state.get("polite", True):  # after a failure a rank may be stuck in a collective
        (spec_dir / "stop").touch()
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.02)
    if procs:  # polite or not, kill what is left and reap every rank (no zombie children)
        _processes.stop(procs, state["token"])
    if state.get("watcher") is not None:
        _processes.release_watcher(state.pop("watcher"))
    shutil.rmtree(spec_dir, ignore_errors=True)


class Ranks:
    """`world_size` worker processes on this machine, joined in one process group, that run tasks
    on demand: `ranks.run("accumlab.dist.faults:echo")` → one result per rank. Lesson 07."""

    def __init__(
        self,
        world_size: int = 2,
        *,
        device: str = "auto",
        plan: Plan | None = None,
        start_timeout: float = START_TIMEOUT,
    ):
        check_world_size(world_size)
        self.start_timeout = check_timeout(start_timeout)
        if plan is None:
            plan = choose_plan(world_size, device=device)
        instance("plan", plan, Plan, "an accumlab.dist.Plan (from al.dist.choose_plan)")
        if plan.world_size != world_size:
            raise ValueError(f"plan is for {plan.world_size} ranks but world_size={world_size}")
        self.plan, self.world_size = plan, world_size
        self._jobs, self._ready, self._stopped = 0, False, None
        spec_dir = Path(tempfile.mkdtemp(prefix="accumlab-dist-"))
        token = uuid.uuid4().hex
        env = {**_child_env(world_size), _processes.MARK: token}
        spec = {
            "serve": True,
            "plan": plan.as_dict(),
            "timeout": GROUP_TIMEOUT,
            "parent_pid": os.getpid(),
        }
        (spec_dir / "spec.pkl").write_bytes(pickle.dumps(spec))
        self._state = {"spec_dir": spec_dir, "token": token}
        # stops the ranks when this object is dropped or the interpreter exits
        self._finalizer = weakref.finalize(self, _shutdown, self._state)
        self._state["watcher"] = _processes.start_watcher(token, spec_dir, env)  # if we are killed
        self._state["procs"] = start_ranks(world_size, spec_dir, env)

    @property
    def running(self) -> bool:
        return self._stopped is None and bool(self._state.get("procs"))

    def __repr__(self) -> str:
        state = "running" if self.running else f"stopped ({self._stopped or 'closed'})"
        return f"Ranks({self.world_size}, {state}): {self.plan}"

    def _supervise(self, done, job_dir, task, timeout, what, **progress) -> None:
        try:
            supervise(
                self._state["procs"], done, job_dir=job_dir, log_dir=self._state["spec_dir"],
                task=task, timeout=timeout, what=what, **progress,
            )  # fmt: skip
        except DistError as err:
            self._stopped = str(err).splitlines()[0]
            self._state["polite"] = False
            self.close()
            raise

    def _wait_ready(self) -> None:
        if self._ready:
            return
        spec_dir = self._state["spec_dir"]
        ready = [spec_dir / f"rank{r}.ready" for r in range(self.world_size)]
        self._supervise(
            lambda codes: all(p.exists() for p in ready), spec_dir, "start-up (import torch, join)",
            self.start_timeout, "start",
        )  # fmt: skip
        self._ready = True

    def run(
        self,
        task,
        kwargs: dict | None = None,
        *,
        timeout: float = 120.0,
        progress_total: int | None = None,
        desc: str = "ranks working",
    ) -> list:
        """Run `task(ctx, **kwargs)` on every rank; return the results by rank. WorkerFailed or
        WorkerTimeout (after `timeout` seconds, not counting the ranks' start-up) stop every rank."""
        name = task_name(task)
        kwargs = mapping("kwargs", kwargs if kwargs is not None else {})
        timeout = check_timeout(timeout)
        if progress_total is not None:
            positive_int("progress_total", progress_total)
        instance("desc", desc, str, "a string")
        try:
            payload = pickle.dumps({"task": name, "kwargs": kwargs})
        except Exception as err:  # a lambda, a notebook object: refused before any rank sees it
            raise ValueError(
                f"kwargs must be picklable to reach the worker processes; {type(err).__name__}: {err}"
            ) from None
        if not self.running:  # after the arguments: a bad one is named whatever the ranks' state
            raise DistError(
                f"these ranks are stopped ({self._stopped or 'closed'}): start new ones "
                "(al.dist.Ranks or al.dist.SyncLab)"
            )
        self._wait_ready()
        job_dir = self._state["spec_dir"] / f"job{self._jobs}"
        job_dir.mkdir()
        (job_dir / "job.tmp").write_bytes(payload)
        os.replace(job_dir / "job.tmp", job_dir / "job.pkl")  # the ranks see it whole or not at all
        self._jobs += 1
        reports = [job_dir / f"rank{r}.pt" for r in range(self.world_size)]
        self._supervise(
            lambda codes: all(p.exists() for p in reports), job_dir, name, timeout, "finish",
            progress_total=progress_total, desc=desc,
        )  # fmt: skip
        reports = [read_report(job_dir, r) for r in range(self.world_size)]
        if not all(r.get("ok") for r in reports):
            # a rank reported a failure and is exiting (its peers may have reported the broken
            # connection it left): blame the one that failed first, as `launch` does
            err = root_failure(
                self._state["procs"], {}, job_dir, self._state["spec_dir"], self.world_size, name
            )
            self._stopped = str(err).splitlines()[0]
            self._state["polite"] = False
            self.close()
            raise err
        return [r["result"] for r in reports]

    def close(self) -> None:
        """Stop every rank and remove the launch's folder (safe to call twice)."""
        if self._stopped is None:
            self._stopped = "closed"
        self._finalizer()

    def __enter__(self) -> Ranks:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
