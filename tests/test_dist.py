"""accumlab.dist (lesson 07): backend choice, sharding, launcher fault handling, the experiments'
counts and equivalences, the report, plots, explorer and the GPU recorder (run on CPU here)."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import torch
from matplotlib.figure import Figure

import accumlab as al
from accumlab.dist import backend, launcher
from accumlab.dist.report import checks
from accumlab.dist.shards import global_micro_step, shard

ROOT = Path(__file__).resolve().parents[1]


# --- backend choice -------------------------------------------------------------------------------


def test_plan_without_gpu_is_gloo_on_cpu_everywhere():
    plan = al.dist.choose_plan(2, gpu_count=0)
    assert (plan.backend, plan.ddp_device(1), plan.fsdp_device(1)) == ("gloo", "cpu", "cpu")
    assert "no GPU" in str(plan)


def test_plan_two_ranks_one_gpu_uses_gloo_on_cuda_and_fsdp_on_cpu():
    plan = al.dist.choose_plan(2, gpu_count=1)
    assert plan.backend == "gloo"  # NCCL refuses two ranks on one GPU
    assert (plan.ddp_device(0), plan.ddp_device(1)) == ("cuda:0", "cuda:0")
    assert plan.fsdp_device(1) == "cpu"  # FSDP2 with gloo on CUDA hung


@pytest.mark.parametrize("world,gpus", [(1, 1), (2, 2), (4, 8)])
def test_plan_one_rank_per_gpu_is_nccl(world, gpus):
    plan = al.dist.choose_plan(world, gpu_count=gpus)
    assert plan.backend == "nccl"
    assert [plan.ddp_device(r) for r in range(world)] == [f"cuda:{r}" for r in range(world)]


def test_plan_under_torchrun_with_one_visible_gpu_per_process():
    # torchrun (or SLURM) can show each process ONE GPU: every rank sees device_count() == 1
    old_rule = al.dist.choose_plan(8, gpu_count=1, ranks_per_node=8)
    assert old_rule.backend == "gloo"  # counting alone cannot tell: this was the silent pick
    ids = [f"node/GPU-{i}" for i in range(8)]
    plan = al.dist.choose_plan(8, gpu_count=1, ranks_per_node=8, gpu_ids=ids)
    assert plan.backend == "nccl" and plan.ddp_device(5) == "cuda:0"  # its own GPU, as cuda:0
    assert "compared GPU identities" in plan.reason
    shared = al.dist.choose_plan(2, gpu_count=1, ranks_per_node=2, gpu_ids=["n/GPU-0"] * 2)
    assert (shared.backend, shared.fsdp_device(1)) == ("gloo", "cpu")
    with pytest.raises(ValueError, match="gpu_ids"):
        al.dist.choose_plan(2, gpu_count=1, ranks_per_node=2, gpu_ids=["n/GPU-0"])


def test_plan_multi_node_counts_ranks_per_node():
    plan = al.dist.choose_plan(16, gpu_count=8, ranks_per_node=8)
    assert plan.backend == "nccl" and plan.world_size == 16


def test_plan_cpu_forced_and_bad_values():
    assert al.dist.choose_plan(2, gpu_count=4, device="cpu").backend == "gloo"
    with pytest.raises(ValueError, match="world_size"):
        al.dist.choose_plan(0, gpu_count=0)
    with pytest.raises(ValueError, match="device"):
        al.dist.choose_plan(2, gpu_count=0, device="tpu")
    with pytest.raises(ValueError, match="gpu_count"):
        al.dist.choose_plan(2, gpu_count=-1)
    assert backend.choose_plan(1).world_size == 1  # detects this machine


# --- sharding -------------------------------------------------------------------------------------


def test_shards_cover_the_global_batch_once_and_match_the_global_micro_steps():
    import torch

    data = al.regression_data(n=2 * 3 * 4, features=2, seed=1)
    pieces = [shard(data, r, 2, i, 4) for i in range(3) for r in range(2)]
    assert torch.equal(torch.cat([p.x for p in pieces]), data.x)
    for i in range(3):
        together = torch.cat([shard(data, r, 2, i, 4).x for r in range(2)])
        assert torch.equal(together, global_micro_step(data, 2, i, 4).x)
    with pytest.raises(ValueError, match="rank"):
        shard(data, 2, 2, 0, 4)
    with pytest.raises(ValueError, match="micro_step"):
        shard(data, 0, 2, 3, 4)


# --- launcher input checks (no processes) ---------------------------------------------------------


def _local_function(ctx):
    return ctx.rank


def test_task_name_accepts_package_functions_and_refuses_unimportable_ones():
    from accumlab.dist import faults

    assert launcher.task_name(faults.echo) == "accumlab.dist.faults:echo"
    assert launcher.task_name("accumlab.dist.faults:echo") == "accumlab.dist.faults:echo"
    with pytest.raises(ValueError, match="top-level"):
        launcher.task_name(lambda ctx: 0)
    main_fn = type(_local_function)(_local_function.__code__, {}, "cell_fn")
    main_fn.__module__ = "__main__"
    with pytest.raises(ValueError, match="notebook cells"):
        launcher.task_name(main_fn)
    with pytest.raises(ValueError, match="no function"):
        launcher.task_name("accumlab.dist.faults:nope")
    with pytest.raises(ValueError, match="look like"):
        launcher.task_name("accumlab.dist.faults.echo")


def test_launch_rejects_bad_arguments_before_starting_anything():
    with pytest.raises(ValueError, match="world_size"):
        al.dist.launch("accumlab.dist.faults:echo", 0)
    with pytest.raises(ValueError, match="timeout"):
        al.dist.launch("accumlab.dist.faults:echo", 2, timeout=0)
    with pytest.raises(ValueError, match="parts"):
        al.dist.sync_experiments(2, parts=("ddp", "magic"))
    # no worker was started (other tests' helpers, e.g. a framework's, may still be winding down)
    assert [p for p in psutil.Process().children(recursive=True) if _is_worker(p)] == []


def _is_worker(proc) -> bool:
    try:
        return "accumlab.dist.worker" in " ".join(proc.cmdline())
    except psutil.Error:  # exited meanwhile
        return False


def test_free_port_is_bindable_on_loopback():
    import socket

    port = al.dist.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


# --- report checks can fail -----------------------------------------------------------------------


def _fake_summary(no_sync_rounds):
    ref = {"max_rel": 1e-16, "max_abs": 0.0, "rel_l2": 0.0, "cosine": 1.0}
    mode = lambda rounds, nbytes: {  # noqa: E731
        "per_backward": rounds,
        "allreduce_calls": sum(rounds),
        "allreduce_bytes": nbytes,
        "rank_max_abs_diff": 0.0,
        "vs_reference": ref,
    }
    return {
        "k": 2,
        "ddp": {
            "every": mode([1, 1], 200),
            "no_sync": mode(no_sync_rounds, 100),
            "require_flag": mode([0, 1], 100),
            "backward_only": mode([1, 1], 200),
        },
    }


def test_checks_pass_on_the_expected_counts_and_fail_otherwise():
    assert all(checks(_fake_summary([0, 1])).values())
    bad = checks(_fake_summary([1, 1]))
    assert not bad["no_sync: one round per optimizer step, on the last micro-step"]


def _fake_fsdp(counted=True, error=None, rs_last=(0, 3), world=2):
    ref = {"max_rel": 1e-16}
    v = lambda rs: {  # noqa: E731
        "reduce_scatter_calls": sum(rs),
        "reduce_scatter_bytes": 100 * sum(rs),
        "reduce_scatter_per_backward": list(rs),
        "all_gather_calls": 12,
        "collectives_counted": counted,
        "vs_reference": ref,
    }
    f = {
        "variants": ["sync_each", "sync_last"],
        "internals_error": error,
        "sync_each": v((3, 3)),
        "sync_last": v(rs_last),
    }
    return {"k": 2, "world_size": world, "fsdp": f}


def test_fsdp_checks_fail_loudly_when_nothing_could_be_counted():
    assert all(checks(_fake_fsdp()).values())
    # counting unavailable: zeros everywhere used to pass "[0] * (k - 1)" and "0 == k * 0"
    zeros = _fake_fsdp(counted=False, rs_last=(0, 0))
    zeros["fsdp"]["sync_each"].update(reduce_scatter_calls=0, reduce_scatter_bytes=0)
    result = checks(zeros)
    assert result["FSDP2: collectives counted (FSDP2 internals present)"] is False
    assert not all(result.values())
    missing = checks(_fake_fsdp(error="torch 9: internals differ"))
    assert missing["FSDP2: unsharded bytes read (FSDP2 internals present)"] is False
    # world size 1: FSDP2 skips every reduce-scatter, and that is what is checked
    one = _fake_fsdp(rs_last=(0, 0), world=1)
    one["fsdp"]["sync_each"].update(reduce_scatter_calls=0, reduce_scatter_per_backward=[0, 0])
    assert all(checks(one).values())


def test_missing_fsdp_internals_give_none_and_the_reason(monkeypatch):
    import torch
    import torch.distributed.fsdp as fsdp_pkg

    from accumlab.dist.comm import count_fsdp_collectives
    from accumlab.dist.fsdp import held_bytes

    # a torch whose modules lack _get_fsdp_state: every Linear now "is" an FSDP module
    monkeypatch.setattr(fsdp_pkg, "FSDPModule", torch.nn.Linear)
    model = al.mlp(features=4, hidden=8)
    model(torch.ones(2, 4, dtype=torch.float64)).sum().backward()
    held = held_bytes(model)
    assert held["unsharded"] is None and held["total"] is None
    assert "internals differ" in held["error"]
    monkeypatch.setitem(sys.modules, "torch.distributed.fsdp._fully_shard._fsdp_collectives", None)
    assert count_fsdp_collectives(model, None, None) is False


def test_the_installed_torch_has_the_fsdp2_internals_the_lesson_reads():
    # fails loudly in CI the day a torch upgrade removes them
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import (  # noqa: F401
        DefaultAllGather,
        DefaultReduceScatter,
    )

    assert hasattr(FSDPModule, "set_custom_reduce_scatter")
    assert hasattr(FSDPModule, "set_reshard_after_backward")
    assert hasattr(FSDPModule, "set_reshard_after_forward")
    assert hasattr(FSDPModule, "_get_fsdp_state")


# --- plots and explorer on a synthetic sweep ------------------------------------------------------


def _rows():
    rows = []
    for ranks in (1, 2):
        for k in (1, 2, 4):
            for m in (8, 32):
                for ns in (False, True):
                    calls = 1 if ns else k
                    rows.append(
                        {
                            "ranks": ranks,
                            "k": k,
                            "micro_batch": m,
                            "no_sync": ns,
                            "allreduce_calls": calls,
                            "allreduce_bytes": 1000 * calls,
                            "step_time_s": 0.001 * k + 0.0005 * calls,
                            "allreduce_alone_s": 0.0004,
                        }
                    )
    return rows


def test_sweep_view_and_bad_values():
    view = al.dist.sweep_view(_rows(), 2, 4, 8, True)
    assert view["selected"]["allreduce_calls"] == 1
    assert view["series"][False]["allreduce_calls"] == [1, 2, 4]
    # the step's all-reduces at what one took when timed alone
    assert view["series"][False]["allreduce_time_s"] == [0.0004, 0.0008, 0.0016]
    with pytest.raises(ValueError, match="k must be one of"):
        al.dist.sweep_view(_rows(), 2, 3, 8, True)
    with pytest.raises(ValueError, match="rows"):
        al.dist.sweep_view([], 1, 1, 8, True)


def test_explorer_follows_its_controls():
    ex = al.dist.sync_explorer(_rows(), source=" (test)")
    assert ex.controls["k"].options == (1, 2, 4)  # only measured values are reachable
    assert (ex.controls["ranks"].min, ex.controls["ranks"].max) == (1, 2)
    ex.controls["no_sync"].value = False
    ex.controls["k"].value = 4
    assert ex.data["selected"]["allreduce_calls"] == 4
    ex.controls["ranks"].value = 1
    assert ex.data["ranks"] == 1 and isinstance(ex.figure, Figure)


def test_plots_return_figures():
    rows = _rows()
    assert isinstance(al.dist.plot_step_times(rows, ranks=2, micro_batch=8), Figure)
    assert isinstance(al.dist.plot_sync_explorer(al.dist.sweep_view(rows, 1, 2, 32, False)), Figure)
    s = _fake_summary([0, 1])
    assert isinstance(al.dist.plot_sync_rounds(s["ddp"]), Figure)
    ref = {"max_rel": 0.25}
    tokens = {
        "tokens_per_rank": [3, 5],
        "local_mean": {"vs_reference": ref},
        "global_count": {"vs_reference": {"max_rel": 0.0}},
    }
    assert isinstance(al.dist.plot_token_normalisation(tokens), Figure)
    v = {"grad_bytes_per_micro_step": [2, 2], "reduce_scatter_bytes": 10}
    fsdp = {
        "param_bytes_full": 4,
        "sync_each": v,
        "sync_last": {**v, "grad_bytes_per_micro_step": [4, 2]},
    }
    assert isinstance(al.dist.plot_fsdp_grad_memory(fsdp), Figure)


# --- real processes: fault injection and the experiments ------------------------------------------


def _no_leftovers(marker: str):
    """No child of this process, and no process anywhere whose command line names `marker`."""
    assert psutil.Process().children(recursive=True) == []
    for p in psutil.process_iter(["cmdline"]):
        assert marker not in " ".join(p.info["cmdline"] or []), f"leftover worker {p.pid}"


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    # the launcher's spec folder (named on every worker's command line) lands under tmp_path
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return str(tmp_path)


@pytest.mark.slow
def test_raising_worker_is_a_clear_error_and_leaves_nothing(private_tmp):
    t0 = time.monotonic()
    with pytest.raises(
        al.dist.WorkerFailed, match=r"rank 1 of 2 raised ValueError: injected failure"
    ):
        al.dist.launch("accumlab.dist.faults:raise_on_rank", 2, timeout=90)
    assert time.monotonic() - t0 < 90
    _no_leftovers(private_tmp)


@pytest.mark.slow
def test_hanging_worker_times_out_and_leaves_nothing(private_tmp):
    t0 = time.monotonic()
    with pytest.raises(
        al.dist.WorkerTimeout, match=r"did not finish within 8 s.*All worker processes were stopped"
    ):
        al.dist.launch("accumlab.dist.faults:hang_on_rank", 2, timeout=8)
    assert time.monotonic() - t0 < 8 + 5  # the timeout, plus at most the SIGTERM grace and reaping
    _no_leftovers(private_tmp)


def _cli_failure(proc, why: str) -> str:
    """What a failing CLI run said: the reason, every FAILED check, then its whole output."""
    failed = [line.strip() for line in proc.stdout.splitlines() if "[FAILED]" in line]
    return (
        f"{why} (exit status {proc.returncode}); failed checks: {failed or 'none printed'}\n"
        f"--- stdout:\n{proc.stdout}\n--- stderr (last 4000 characters):\n{proc.stderr[-4000:]}"
    )


@pytest.mark.slow
def test_cli_prints_counts_and_checks(tmp_path):
    out = tmp_path / "summary.json"
    proc = subprocess.run(
        [sys.executable, "-m", "accumlab.dist", "--k", "3", "--micro-batch", "4", "--parts",
         "ddp,buckets", "--timeout", "120", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, _cli_failure(proc, "the CLI failed")
    assert "[FAILED]" not in proc.stdout, _cli_failure(proc, "a check failed")
    assert "[ok] no_sync: one round per optimizer step" in proc.stdout, _cli_failure(
        proc, "no check"
    )
    summary = json.loads(out.read_text())
    ddp = summary["ddp"]
    rounds = {m: ddp[m]["per_backward"] for m in ("every", "no_sync")}
    assert rounds == {"every": [1, 1, 1], "no_sync": [0, 0, 1]}, _cli_failure(proc, f"{rounds}")
    view = summary["ddp_buckets"]["gradient_as_bucket_view"]
    assert view["true"]["after_backward"] < 2 * summary["ddp_buckets"]["grad_bytes"], view


@pytest.mark.slow
def test_world_size_one_passes_its_checks():
    # FSDP2 skips the reduce-scatter at world size 1: the CLI used to exit 1 on the FSDP check
    proc = subprocess.run(
        [sys.executable, "-m", "accumlab.dist", "--world-size", "1", "--parts", "ddp,fsdp",
         "--timeout", "120"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[ok] FSDP2 at world size 1: no reduce-scatter at all" in proc.stdout
    assert "FAILED" not in proc.stdout


@pytest.mark.slow
def test_torchrun_ranks_choose_the_plan_together(tmp_path):
    out = tmp_path / "summary.json"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "accumlab.dist", "--parts", "ddp", "--k", "2", "--timeout", "120",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads(out.read_text())
    assert summary["world_size"] == 2 and summary["plan"]["backend"] == "gloo"
    assert summary["ddp"]["no_sync"]["per_backward"] == [0, 1]


def test_cli_rejects_bad_arguments_with_a_usage_error(capsys):
    from accumlab.dist.__main__ import parse

    for argv in (["--parts", "ddp,magic"], ["--k", "0"], ["--world-size", "-1"]):
        with pytest.raises(SystemExit) as exc:
            parse(argv)
        assert exc.value.code == 2
    assert "must be" in capsys.readouterr().err
    assert parse(["--parts", "ddp,fsdp"]).parts == ("ddp", "fsdp")


def test_experiment_sizes_are_bounded_before_launching():
    for kwargs, name in (({"k": 10**9}, "k"), ({"micro_batch": 10**9}, "micro_batch")):
        with pytest.raises(ValueError, match=name):
            al.dist.sync_experiments(2, **kwargs)
    assert psutil.Process().children(recursive=True) == []


# --- the plan's bound, the sampler, the new parts' checks ------------------------------------------


def test_a_plan_for_this_machine_has_the_launchers_bound():
    from accumlab.dist.launcher import max_world_size

    most = max_world_size()
    assert al.dist.choose_plan(most).world_size == most
    with pytest.raises(ValueError, match=rf"world_size must be at most {most}, got 1000000"):
        al.dist.choose_plan(10**6)
    with pytest.raises(ValueError, match=rf"world_size must be at most {most}"):
        al.dist.launch("accumlab.dist.faults:echo", 10**6)  # the same words
    with pytest.raises(ValueError, match="ranks_per_node"):
        al.dist.choose_plan(64, ranks_per_node=10**3)  # this node's ranks, under torchrun
    with pytest.raises(ValueError, match="ranks_per_node must be at most world_size"):
        al.dist.choose_plan(2, gpu_count=2, ranks_per_node=4)
    # a plan for another machine (its GPUs given) is allowed, and says it cannot run here
    cluster = al.dist.choose_plan(64, gpu_count=8, ranks_per_node=8)
    assert cluster.backend == "nccl" and "starts at most" not in cluster.reason
    big = al.dist.choose_plan(10**6, gpu_count=10**6)
    assert f"this machine starts at most {most}" in big.reason


def test_sampler_split_is_torchs_distributed_sampler():
    assert al.dist.sampler_split(9, 2) == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 0]]  # padded with 0
    assert al.dist.sampler_split(9, 2, drop_last=True) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert al.dist.sampler_split(8, 2) == al.dist.sampler_split(8, 2, drop_last=True)
    with pytest.raises(ValueError, match="drop_last"):
        al.dist.sampler_split(1, 2, drop_last=True)


def _uneven(finished=(False, True), calls=(3, 2), join=(3, 3), seconds=1.2, rel=0.0,
            per_forward=(2,) * 5, remaining=1.0, throw=(3,) * 4):  # fmt: skip
    return {
        "k": 2,
        "micro_batches": [5, 4],
        "wait_s": 1.0,
        "plain": {"finished": list(finished), "allreduce_calls": list(calls),
                  "seconds": [seconds, 0.01], "error": "timed out"},
        "join": {"allreduce_calls": list(join),
                 "rank0_last_window_vs_local_over_world": {"max_rel": rel},
                 "forwards": [5, 4], "other_allreduce_calls": [12, 12],
                 "other_allreduce_per_forward": list(per_forward),
                 "rank0_last_window_over_local": {"hook_initial": 0.5, "hook_remaining": 0.5,
                                                  "no_hook_initial": 0.5,
                                                  "no_hook_remaining": remaining},
                 "rank0_last_window_off_proportional": 0.0,
                 "throw": {"raised": ["exhausted", "exhausted"],
                           "other_allreduce_per_forward": list(throw)}},
    }  # fmt: skip


def test_uneven_checks_fail_when_nothing_hung_or_join_did_not_shadow():
    from accumlab.dist.report import uneven_checks

    assert all(uneven_checks(_uneven()).values())
    assert not all(uneven_checks(_uneven(finished=(True, True))).values())  # nobody waited
    assert not all(uneven_checks(_uneven(calls=(2, 2))).values())  # waited elsewhere
    assert not all(uneven_checks(_uneven(seconds=0.5)).values())  # gave up before the timeout
    assert not all(uneven_checks(_uneven(join=(3, 2))).values())  # rank 1 did not join in
    assert not all(uneven_checks(_uneven(rel=0.5)).values())  # not divided by the ranks
    # Join's own all-reduces: not on every forward; the division without a hook not measured
    assert not all(uneven_checks(_uneven(per_forward=(2, 2, 2, 2, 0))).values())
    assert not all(uneven_checks(_uneven(remaining=0.5)).values())
    assert not all(uneven_checks(_uneven(throw=(2,) * 4)).values())


def _clipping(before=(0.9, 1.5), fsdp_before=(0.0, 0.0), shards=(8.0, 4.9), combined=0.0):
    return {
        "ddp": {"before_last": list(before), "after_sync": [1.67, 1.67], "reference_norm": 1.67,
                "after_sync_vs_reference": 0.0},
        "fsdp": {"before_last": list(fsdp_before), "grads_before_last": [0, 0],
                 "shard_norms": list(shards), "after_sync": [9.4, 9.4], "reference_norm": 9.4,
                 "after_sync_vs_reference": 0.0, "shards_combined_vs_reference": combined,
                 "clip_to": 0.5, "clipped_vs_reference": {"max_rel": 1e-8}},
    }  # fmt: skip


def test_clipping_checks_fail_on_a_norm_taken_too_early_or_per_shard():
    from accumlab.dist.report import clipping_checks

    assert all(clipping_checks(_clipping()).values())
    assert not all(clipping_checks(_clipping(before=(1.5, 1.5))).values())  # ranks agreed early
    assert not all(clipping_checks(_clipping(fsdp_before=(3.0, 3.0))).values())
    assert not all(clipping_checks(_clipping(shards=(9.4, 0.0))).values())  # a shard = the whole
    assert not all(clipping_checks(_clipping(combined=0.1)).values())


def test_hsdp_and_accelerate_checks_fail_on_the_wrong_rounds():
    mode = lambda rounds: {  # noqa: E731
        "per_backward": rounds, "allreduce_calls": sum(rounds), "rank_max_abs_diff": 0.0,
        "vs_reference": {"max_rel": 1e-16},
    }  # fmt: skip
    hsdp = {"sync_each": mode([3, 3]), "all_reduce_last": mode([0, 3]), "sync_last": mode([0, 3])}
    acc = {
        "version": "x",
        "sync_each_batch_false": mode([0, 1]),
        "sync_each_batch_true": mode([1, 1]),
    }
    assert all(checks({"k": 2, "hsdp": hsdp, "accelerate": acc}).values())
    bad = checks({"k": 2, "hsdp": {**hsdp, "all_reduce_last": mode([3, 3])},
                  "accelerate": {**acc, "sync_each_batch_true": mode([0, 1])}})  # fmt: skip
    assert sum(not ok for ok in bad.values()) == 2
    skipped = checks({"k": 2, "hsdp": {"skipped": "why"}, "accelerate": {"skipped": "why"}})
    assert skipped == {}  # nothing run, nothing claimed


def test_step_time_plot_names_what_was_timed():
    for plan, words in (
        (al.dist.choose_plan(2, gpu_count=1), "host memory"),
        (al.dist.choose_plan(2, gpu_count=0), "gloo on CPU processes"),
        (al.dist.choose_plan(2, gpu_count=2), "NCCL"),
    ):
        fig = al.dist.plot_step_times(_rows(), ranks=2, micro_batch=8, plan=plan.as_dict())
        assert words in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="plan"):
        al.dist.plot_step_times(_rows(), ranks=2, micro_batch=8, plan={"backend": "gloo"})


# --- ranks that stay up ------------------------------------------------------------------------


@pytest.mark.slow
def test_ranks_stay_up_between_runs_and_a_failure_stops_them(private_tmp):
    ranks = al.dist.Ranks(2)
    pids = [p.pid for p in ranks._state["procs"]]
    first = ranks.run("accumlab.dist.faults:echo", {"tag": 1}, timeout=120)
    again = ranks.run("accumlab.dist.faults:echo", timeout=60)
    assert [r["tag"] for r in first] == [1, 1] and [r["rank"] for r in again] == [0, 1]
    assert [p.pid for p in ranks._state["procs"]] == pids  # the same processes ran both
    with pytest.raises(al.dist.WorkerFailed, match="rank 1 of 2 raised ValueError"):
        ranks.run("accumlab.dist.faults:raise_on_rank", timeout=60)
    assert not ranks.running
    for pid in pids:  # every rank's process has exited and been reaped, not only flagged
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with pytest.raises(al.dist.DistError, match="stopped"):
        ranks.run("accumlab.dist.faults:echo")
    _no_leftovers(private_tmp)


@pytest.mark.slow
def test_ranks_time_out_and_close_leaves_nothing(private_tmp):
    with al.dist.Ranks(2) as ranks:
        # held here so that garbage collection cannot reap them for us: close must wait for them
        procs = list(ranks._state["procs"])
        with pytest.raises(al.dist.WorkerTimeout, match="did not finish within 5 s"):
            ranks.run("accumlab.dist.faults:hang_on_rank", timeout=5)
    assert all(p.returncode is not None for p in procs), "a rank was killed but never reaped"
    _no_leftovers(private_tmp)
    with al.dist.Ranks(2) as ranks:
        assert ranks.run("accumlab.dist.faults:echo", timeout=120)[0]["rank_sum"] == 1.0
    _no_leftovers(private_tmp)


@pytest.mark.slow
def test_a_launch_needs_no_port_picked_in_advance(private_tmp, monkeypatch):
    """A port picked by the launcher and bound by rank 0 seconds later can be taken meanwhile:
    here it is, on purpose, and the launch must not care."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        monkeypatch.setattr(launcher, "free_port", lambda: taken.getsockname()[1])
        assert [r["rank"] for r in al.dist.launch("accumlab.dist.faults:echo", 2, timeout=120)] == [
            0,
            1,
        ]
    finally:
        taken.close()


@pytest.mark.slow
def test_sync_lab_runs_parts_on_demand_and_keeps_a_summary():
    with al.dist.SyncLab(2, k=2, micro_batch=4) as lab:
        tok = lab.run("tokens", progress=False)
        assert tok["global_count"]["vs_reference"]["max_rel"] < 1e-9
        both = lab.run("ddp", "buckets", progress=False)
        assert both["ddp"]["no_sync"]["per_backward"] == [0, 1] and "ddp_buckets" in both
        assert {"tokens", "ddp", "ddp_buckets"} <= set(lab.summary)
        assert set(lab.summary["seconds_per_part"]) == {"tokens", "ddp", "buckets"}
        assert all(checks(lab.summary).values()), checks(lab.summary)
        with pytest.raises(ValueError, match="parts"):
            lab.run("nope")
        with pytest.raises(ValueError, match="parts must not be empty"):
            lab.run()


def _buckets(after_backward_false=2, window_true_none_false=None, g=297_988, n=6):
    from accumlab.dist.report import window_pattern

    held = {key: [c * g for c in cs] for key, cs in window_pattern(4, 3).items()}
    if window_true_none_false is not None:
        held["view_true_set_to_none_false"] = [c * g for c in window_true_none_false]
    view = {"false": {"after_wrap": g, "after_backward": after_backward_false * g},
            "true": {"after_wrap": g, "after_backward": g}}  # fmt: skip
    # the most held at once per window, as measured: 2.97 copies while fresh .grad tensors sit
    # beside the buckets, 2 while DDP rebuilds its buckets (window 1 syncing every micro-step,
    # window 2 under no_sync), then the backward's own 1.97 once every .grad is a view
    peak = {key: [2.97 * g] * 3 for key in held}
    peak["view_true_sync_each"] = [2 * g, 1.97 * g, 1.97 * g]
    peak["view_true_set_to_none_false"] = [2.97 * g, 2 * g, 1.97 * g]
    peak = {key: [int(x) for x in xs] for key, xs in peak.items()}
    return {"grad_bytes": g, "n_params": n, "k": 4, "device": "cpu",
            "gradient_as_bucket_view": view, "window": held, "window_peak": peak}  # fmt: skip


def test_bucket_checks_count_whole_copies_and_refuse_a_third_or_a_missing_one():
    from accumlab.dist.report import bucket_checks, copies

    assert all(bucket_checks(_buckets()).values())
    assert not all(bucket_checks(_buckets(after_backward_false=3)).values())  # a third copy kept
    assert not all(bucket_checks(_buckets(after_backward_false=1)).values())  # no .grad copy
    # the views kept across windows although set_to_none=True dropped them: refused
    assert not all(bucket_checks(_buckets(window_true_none_false=[2] * 12)).values())
    assert copies(2 * 297_988 + 511 * 6, 297_988, 6) == 2  # CUDA rounds each block to 512 B
    assert copies(2 * 297_988 + 7_000, 297_988, 6) is None  # more than rounding: not a copy
    assert copies(2 * 297_988, 297_988, 6, block=0) == 2  # the CPU meter is exact
    assert copies(2 * 297_988 + 6_143, 297_988, 6, block=0) is None  # ... and so is the check
    assert copies(2 * 297_988 + 4, 297_988, 6, block=0) == 2  # a micro-step's loss still alive
    assert copies(2 * 297_988 + 17, 297_988, 6, block=0) is None  # more than four scalars
    off_by_a_little = _buckets()
    off_by_a_little["gradient_as_bucket_view"]["false"]["after_backward"] += 64
    assert not all(bucket_checks(off_by_a_little).values())  # on the CPU, not a whole copy
    # the high point per window: syncing every micro-step with the view stays at two copies
    flat = _buckets()
    flat["window_peak"]["view_true_sync_each"] = [2 * 297_988, 2 * 297_988 + 17, 2 * 297_988]
    assert not all(bucket_checks(flat).values())
    # ... and so do the kept views from the second window on, but not in the first; from the
    # third (after the rebuild) at the same high point: 2 copies there against 1.97 is refused
    d, r = int(2.97 * 297_988), int(1.97 * 297_988)
    for peaks in ([2 * 297_988] * 3, [d] * 3, [d, 2 * 297_988], [d, 2 * 297_988, 2 * 297_988]):
        kept = _buckets()
        kept["window_peak"]["view_true_set_to_none_false"] = peaks
        assert not all(bucket_checks(kept).values()), peaks
    # the views dropped (set_to_none=True) but a window at two copies: refused
    dropped = _buckets()
    dropped["window_peak"]["view_true_set_to_none_true"] = [d, 2 * 297_988, r]
    assert not all(bucket_checks(dropped).values())
    two = _buckets()
    two["window"]["view_true_sync_each"] = [2 * 297_988] * 12
    assert not all(bucket_checks(two).values())


def test_fsdp_checks_want_the_exact_padded_shard_and_the_backward_transient():
    from accumlab.dist.report import fsdp_checks

    def fsdp(held_each=21_512, at_rs=(50_440, 71_432, 71_432, 71_432), rank1=21_512):
        r = {"reduce_scatter_calls": 12, "reduce_scatter_bytes": 4 * 43_024,
             "reduce_scatter_per_backward": [3] * 4, "collectives_counted": True,
             "vs_reference": {"max_rel": 0.0}, "held_grad_bytes": held_each,
             "held_grad_bytes_per_rank": [held_each, rank1],
             "grad_bytes_per_micro_step": [held_each] * 4,
             "grad_bytes_at_reduce_scatter": list(at_rs)}  # fmt: skip
        last = {**r, "reduce_scatter_bytes": 43_024, "reduce_scatter_per_backward": [0, 0, 0, 3],
                "held_grad_bytes": 42_504}  # fmt: skip
        return {"param_bytes_full": 42_504, "shard_bytes_expected": 21_512,
                "unit_bytes": [8704, 33280, 520], "sync_each": r, "sync_last": last}  # fmt: skip

    name = "FSDP2: syncing every micro-step, every rank holds its padded shard between micro-steps"
    assert all(fsdp_checks(fsdp(), 4, 2).values())
    assert not fsdp_checks(fsdp(held_each=0), 4, 2)[name]  # the shards not counted
    assert not fsdp_checks(fsdp(held_each=21_252), 4, 2)[name]  # unpadded
    assert not fsdp_checks(fsdp(rank1=20_992), 4, 2)[name]  # rank 1's views, not its storage
    # a backward that makes no parameter gradient has no reduce-scatter to read at
    assert not all(fsdp_checks(fsdp(at_rs=(0, 0, 0, 0)), 4, 2).values())
    # the parameters' all-gather is as large as a unit's gradient, but is not one
    assert not all(fsdp_checks(fsdp(at_rs=(33_280,) * 4), 4, 2).values())


def test_explorer_sends_nothing_between_ranks_at_one_rank_and_states_its_noise():
    one = al.dist.sweep_view(_rows(), 1, 4, 8, False)
    assert one["selected"]["allreduce_calls"] == 4  # DDP's hook ran on the 1-rank group
    assert one["series"][False]["bytes_between_ranks"] == [0, 0, 0]
    two = al.dist.sweep_view(_rows(), 2, 4, 8, False)
    assert two["series"][False]["bytes_between_ranks"] == two["series"][False]["allreduce_bytes"]
    rows = [dict(r) for r in _rows()]
    for r in rows:  # k = 1 timed 2 ms apart although both modes run the same code there
        r["step_time_s"] += 0.002 if (r["k"], r["no_sync"]) == (1, True) else 0.0
    view = al.dist.sweep_view(rows, 2, 4, 8, True)
    assert abs(view["noise_s"] - 0.002) < 1e-12
    title = al.dist.plot_sync_explorer(view)._suptitle.get_text()
    assert "2.00 ms" in title and "noisy" in title
    title = al.dist.plot_sync_explorer(one)._suptitle.get_text()
    assert "nothing sent between ranks" in title and "KiB" not in title.split("\n")[0]


def test_exercise_07_hints_name_no_missing_loop_and_ask_for_digits():
    for partial in ("A", "C", "D", "AC", "AD", "CD"):
        message = al.check("07.2", partial).message
        assert "Hint:" in message
        hint = message.split("Hint:")[1]
        assert not any(f" {c} " in f" {hint} " or f"{c}:" in hint for c in "ACD"), hint
    coarse = al.check("07.3", lambda local, total, world, k: round(total / (world * k), 3))
    assert "close — give more digits" in coarse.message
    own = al.check(
        "07.4", __import__("accumlab.exercises.lesson07").exercises.lesson07.fsdp_bytes_expected
    )
    assert not own.ok and "write it yourself" in own.message


def test_bucket_readings_do_not_count_garbage_held_in_a_reference_cycle():
    """A tensor only a reference cycle keeps alive is freed at the next collection: the bucket
    readings run the collector first, so it never reads as bytes DDP holds."""
    import gc

    from accumlab.device import MemoryMeter
    from accumlab.dist.buckets import collected_now

    gc.disable()  # so that no automatic collection frees the cycle before the reading
    try:
        with MemoryMeter("cpu") as meter:
            box = [torch.ones(3)]
            box.append(box)  # the list refers to itself: only the collector frees it
            del box
            assert meter.now() == 12  # the plain reading still counts the garbage
            assert collected_now(meter) == 0
    finally:
        gc.enable()
