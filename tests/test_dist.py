"""accumlab.dist (lesson 07): backend choice, sharding, launcher fault handling, the experiments'
counts and equivalences, the report, plots, explorer and the GPU recorder (run on CPU here)."""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
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
                        }
                    )
    return rows


def test_sweep_view_and_bad_values():
    view = al.dist.sweep_view(_rows(), 2, 4, 8, True)
    assert view["selected"]["allreduce_calls"] == 1
    assert view["series"][False]["allreduce_calls"] == [1, 2, 4]
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


@pytest.mark.slow
def test_cli_prints_counts_and_checks(tmp_path):
    out = tmp_path / "summary.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "accumlab.dist",
            "--k",
            "3",
            "--micro-batch",
            "4",
            "--parts",
            "ddp",
            "--timeout",
            "120",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAILED" not in proc.stdout and "[ok] no_sync" in proc.stdout
    ddp = json.loads(out.read_text())["ddp"]
    assert ddp["every"]["per_backward"] == [1, 1, 1] and ddp["no_sync"]["per_backward"] == [0, 0, 1]


@pytest.mark.slow
def test_recorder_runs_on_cpu_and_every_relation_holds(tmp_path):
    from accumlab.exercises.lesson07 import fsdp_bytes_expected

    proc = subprocess.run(
        [sys.executable, "-m", "accumlab.record", "dist", "--allow-cpu", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = json.loads((tmp_path / "dist.json").read_text())
    assert rec["meta"]["device_count"] == 0 and "--allow-cpu" in rec["meta"]["command"]
    assert "Recorded on" in al.describe_recorded(rec)
    s = rec["results"]["runs"]["main"]
    assert s["world_size"] == 2 and all(checks(s).values()), checks(s)
    k = s["k"]
    ddp = s["ddp"]
    assert ddp["every"]["per_backward"] == [1] * k
    assert ddp["no_sync"]["per_backward"] == [0] * (k - 1) + [1]
    assert (
        ddp["backward_only"]["allreduce_calls"] == k and ddp["require_flag"]["allreduce_calls"] == 1
    )
    assert ddp["no_sync"]["allreduce_bytes"] * k == ddp["every"]["allreduce_bytes"]
    assert max(m["vs_reference"]["max_rel"] for m in ddp.values()) < 1e-9
    assert s["tokens"]["local_mean"]["vs_reference"]["max_rel"] > 1e-3  # per-rank means are wrong
    assert s["tokens"]["global_count"]["vs_reference"]["max_rel"] < 1e-9
    for v in ("sync_every", "manual_allreduce"):
        assert s["pitfall"][v]["param_max_abs_diff_ranks"] == 0.0
    f = s["fsdp"]
    assert f["sync_last"]["reduce_scatter_per_backward"][:-1] == [0] * (k - 1)
    assert (
        f["sync_last"]["peak_grad_bytes"] == f["param_bytes_full"]
    )  # unsharded until the last step
    sharded, full = fsdp_bytes_expected([(64, 16), (64,), (64, 64), (64,), (1, 64), (1,)], 2, 8)
    assert (f["sync_each"]["peak_grad_bytes"], f["param_bytes_full"]) == (sharded, full)
    assert {r["ranks"] for r in s["sweep"]} == {1, 2}
    for r in s["sweep"]:
        assert r["allreduce_calls"] == (1 if r["no_sync"] else r["k"])


def test_cli_rejects_bad_arguments_with_a_usage_error(capsys):
    from accumlab.dist.__main__ import parse

    for argv in (["--parts", "ddp,magic"], ["--k", "0"], ["--world-size", "-1"]):
        with pytest.raises(SystemExit) as exc:
            parse(argv)
        assert exc.value.code == 2
    assert "must be" in capsys.readouterr().err
    assert parse(["--parts", "ddp,fsdp"]).parts == ("ddp", "fsdp")
