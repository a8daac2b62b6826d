"""Lesson 07 (al.dist, beyond the launcher of tests/test_fuzz_api.py): bad inputs and what each
must do. Nothing here may start a process: every input is refused first (no_processes=True)."""

from __future__ import annotations

from fuzz_harness import bad
from matplotlib.figure import Figure

import accumlab as al

from . import INF, NAN

D = al.dist
ROW = {"ranks": 1, "k": 2, "micro_batch": 8, "no_sync": True, "allreduce_calls": 1,
       "allreduce_bytes": 8, "step_time_s": 0.01, "allreduce_alone_s": 0.001}  # fmt: skip


def _sync(**kw):
    return D.sync_experiments(2, progress=False, **kw)


def _stopped_ranks():
    """A Ranks whose processes have stopped, built without starting any: `run` must name a bad
    argument before it looks at the ranks (tests/test_dist.py runs it on live ranks)."""
    ranks = object.__new__(D.Ranks)
    ranks.world_size, ranks._stopped, ranks._state = 2, "closed", {}
    return ranks


def _stopped_lab():
    lab = object.__new__(D.SyncLab)
    lab.k, lab.micro_batch, lab.seed, lab.timeout = 4, 8, 0, 120.0
    lab.sweep_options, lab.ranks, lab.summary = None, _stopped_ranks(), {}
    return lab


# fmt: off
CASES = [
    bad("dist.sync_experiments", "k=10**6", lambda: _sync(k=10**6), "k", no_processes=True),
    bad("dist.sync_experiments", "micro_batch=10**9", lambda: _sync(micro_batch=10**9), "micro_batch", no_processes=True),
    bad("dist.sync_experiments", "parts 'ddp'", lambda: _sync(parts="ddp"), "parts", "str", no_processes=True),
    bad("dist.sync_experiments", "parts ['DDP']", lambda: _sync(parts=["DDP"]), "parts", "'DDP'", "'ddp'", no_processes=True),
    bad("dist.sync_experiments", "timeout=inf", lambda: _sync(timeout=INF), "timeout", no_processes=True),
    bad("dist.sync_experiments", "device 'gpu'", lambda: _sync(device="gpu"), "device", "'gpu'", no_processes=True),
    bad("dist.sync_experiments", "world_size=10**4", lambda: D.sync_experiments(10**4, progress=False), "world_size", "10000", no_processes=True),
    bad("dist.sync_experiments", "sweep_options 'fast'", lambda: _sync(sweep_options="fast"), "sweep_options", "str", no_processes=True),
    bad("dist.sync_experiments", "sweep_options with an unknown key", lambda: _sync(sweep_options={"kz": (1, 2)}), "sweep_options", "'kz'", no_processes=True),
    bad("dist.sync_experiments", "seed=-1", lambda: _sync(seed=-1), "seed", "-1", no_processes=True),
    bad("dist.sync_experiments", "progress 'no'", lambda: D.sync_experiments(2, progress="no"), "progress", "'no'", no_processes=True),
    bad("dist.launch", "world_size=-1", lambda: D.launch("accumlab.dist.faults:echo", -1), "world_size", "-1", no_processes=True),
    bad("dist.sweep_view", "rows 'x'", lambda: D.sweep_view("x", 2, 4, 8, True), "rows"),
    bad("dist.sweep_view", "rows []", lambda: D.sweep_view([], 2, 4, 8, True), "rows"),
    bad("dist.sweep_view", "a row {}", lambda: D.sweep_view([{}], 1, 2, 8, True), "rows"),
    bad("dist.sweep_view", "ranks=99", lambda: D.sweep_view([ROW], 99, 2, 8, True), "ranks", "99"),
    bad("dist.sweep_view", "no_sync 'yes'", lambda: D.sweep_view([ROW], 1, 2, 8, "yes"), "no_sync", "'yes'"),
    bad("dist.sync_explorer", "rows []", lambda: D.sync_explorer([]), "rows"),
    bad("dist.sync_explorer", "rows 'x'", lambda: D.sync_explorer("x"), "rows", "str"),
    bad("dist.checks", "summary {}", lambda: D.checks({}), "summary"),
    bad("dist.checks", "summary 'x'", lambda: D.checks("x"), "summary", "str"),
    bad("dist.format_summary", "summary {}", lambda: D.format_summary({}), "summary"),
    bad("dist.plot_sync_rounds", "ddp {}", lambda: D.plot_sync_rounds({}), "ddp"),
    bad("dist.plot_sync_rounds", "a mode {}", lambda: D.plot_sync_rounds({"every": {}}), "ddp"),
    bad("dist.plot_step_times", "rows 'x'", lambda: D.plot_step_times("x", ranks=1, micro_batch=8), "rows", "str"),
    bad("dist.plot_step_times", "ranks not measured", lambda: D.plot_step_times([ROW], ranks=7, micro_batch=8), "ranks", "7"),
    bad("dist.plot_fsdp_grad_memory", "fsdp {}", lambda: D.plot_fsdp_grad_memory({}), "fsdp"),
    bad("dist.plot_token_normalisation", "tokens {}", lambda: D.plot_token_normalisation({}), "tokens"),
    bad("dist.plot_sync_explorer", "view {}", lambda: D.plot_sync_explorer({}), "view"),
    bad("dist.update_sync_explorer", "view {}", lambda: D.update_sync_explorer(Figure(), {}), "view"),
    bad("dist.choose_plan", "gpu_count=-1", lambda: D.choose_plan(2, -1), "gpu_count"),
    bad("dist.choose_plan", "world_size=0", lambda: D.choose_plan(0), "world_size", "0"),
    bad("dist.choose_plan", "device 'gpu'", lambda: D.choose_plan(2, device="gpu"), "device", "'gpu'"),
    bad("dist.choose_plan", "gpu_ids 'ab'", lambda: D.choose_plan(2, 2, gpu_ids="ab"), "gpu_ids", "'ab'"),
    bad("dist.choose_plan", "world_size=10**6 on this machine", lambda: D.choose_plan(10**6), "world_size", "1000000"),
    bad("dist.choose_plan", "ranks_per_node > world_size", lambda: D.choose_plan(2, 2, ranks_per_node=3), "ranks_per_node", "3"),
    bad("dist.choose_plan", "ranks_per_node=10**4 on this machine", lambda: D.choose_plan(10**4, ranks_per_node=10**4), "ranks_per_node", "10000"),
    bad("dist.choose_plan", "gpu_count 1.5", lambda: D.choose_plan(2, 1.5), "gpu_count", "1.5"),
    bad("dist.Ranks", "world_size=0", lambda: D.Ranks(0), "world_size", "0", no_processes=True),
    bad("dist.Ranks", "world_size=10**4", lambda: D.Ranks(10**4), "world_size", "10000", no_processes=True),
    bad("dist.Ranks", "start_timeout=inf", lambda: D.Ranks(2, start_timeout=INF), "timeout", "inf", no_processes=True),
    bad("dist.Ranks", "device 'tpu'", lambda: D.Ranks(2, device="tpu"), "device", "'tpu'", no_processes=True),
    bad("dist.Ranks", "plan for 3 ranks", lambda: D.Ranks(2, plan=D.choose_plan(3, 0)), "plan", "3", no_processes=True),
    bad("dist.Ranks", "plan 'gloo'", lambda: D.Ranks(2, plan="gloo"), "plan", "str", no_processes=True),
    bad("dist.SyncLab", "world_size=10**4", lambda: D.SyncLab(10**4), "world_size", "10000", no_processes=True),
    bad("dist.SyncLab", "k=0", lambda: D.SyncLab(2, k=0), "k", "0", no_processes=True),
    bad("dist.SyncLab", "micro_batch=10**9", lambda: D.SyncLab(2, micro_batch=10**9), "micro_batch", no_processes=True),
    bad("dist.SyncLab", "timeout=nan", lambda: D.SyncLab(2, timeout=NAN), "timeout", "nan", no_processes=True),
    bad("dist.SyncLab", "sweep_options 'fast'", lambda: D.SyncLab(2, sweep_options="fast"), "sweep_options", "str", no_processes=True),
    bad("dist.SyncLab", "seed=-1", lambda: D.SyncLab(2, seed=-1), "seed", "-1", no_processes=True),
    bad("dist.Ranks.run", "a notebook lambda", lambda: _stopped_ranks().run(lambda ctx: 0), "task", no_processes=True),
    bad("dist.Ranks.run", "kwargs 'x'", lambda: _stopped_ranks().run("accumlab.dist.faults:echo", "x"), "kwargs", "str", no_processes=True),
    bad("dist.Ranks.run", "timeout=nan", lambda: _stopped_ranks().run("accumlab.dist.faults:echo", timeout=NAN), "timeout", "nan", no_processes=True),
    bad("dist.Ranks.run", "progress_total=0", lambda: _stopped_ranks().run("accumlab.dist.faults:echo", progress_total=0), "progress_total", "0", no_processes=True),
    bad("dist.Ranks.run", "kwargs not picklable", lambda: _stopped_ranks().run("accumlab.dist.faults:echo", {"f": lambda: 0}), "kwargs", "picklable", no_processes=True),
    bad("dist.SyncLab.run", "parts 'DDP'", lambda: _stopped_lab().run("DDP"), "parts", "'DDP'", no_processes=True),
    bad("dist.SyncLab.run", "no parts", lambda: _stopped_lab().run(), "parts", no_processes=True),
    bad("dist.SyncLab.run", "progress 'no'", lambda: _stopped_lab().run("ddp", progress="no"), "progress", "'no'", no_processes=True),
    bad("dist.SyncLab.run", "timeout=-1", lambda: _stopped_lab().run("ddp", timeout=-1), "timeout", "-1", no_processes=True),
    bad("dist.SyncLab", "device 'gpu'", lambda: D.SyncLab(2, device="gpu"), "device", "'gpu'", no_processes=True),
    bad("dist.sampler_split", "n_samples=0", lambda: D.sampler_split(0, 2), "n_samples", "0"),
    bad("dist.sampler_split", "n_samples=10**9", lambda: D.sampler_split(10**9, 2), "n_samples", "1000000000"),
    bad("dist.sampler_split", "world_size=0", lambda: D.sampler_split(9, 0), "world_size", "0"),
    bad("dist.sampler_split", "world_size 2.5", lambda: D.sampler_split(9, 2.5), "world_size", "2.5"),
    bad("dist.sampler_split", "drop_last 'yes'", lambda: D.sampler_split(9, 2, drop_last="yes"), "drop_last", "'yes'"),
    bad("dist.sampler_split", "drop_last with fewer samples than ranks", lambda: D.sampler_split(1, 4, drop_last=True), "n_samples", "drop_last"),
    bad("dist.plot_step_times", "plan without its fields", lambda: D.plot_step_times([ROW], ranks=1, micro_batch=8, plan={"backend": "gloo"}), "plan", "ddp_device_type"),
    bad("dist.plot_step_times", "plan 'gloo'", lambda: D.plot_step_times([ROW], ranks=1, micro_batch=8, plan="gloo"), "plan", "str"),
    bad("dist.sync_explorer", "plan without its fields", lambda: D.sync_explorer([ROW], plan={"backend": "gloo"}), "plan", "ddp_device_type"),
    bad("dist.sync_explorer", "plan 'gloo'", lambda: D.sync_explorer([ROW], plan="gloo"), "plan", "str"),
    bad("dist.launch", "world_size=10**6", lambda: D.launch("accumlab.dist.faults:echo", 10**6), "world_size", "1000000", no_processes=True),
    bad("dist.record_results", "device 'tpu'", lambda: D.record_results("tpu"), "device", "'tpu'", no_processes=True),
    bad("dist.record_results", "size 'huge'", lambda: D.record_results("cpu", "huge"), "size", "'huge'", no_processes=True),
]
# fmt: on
