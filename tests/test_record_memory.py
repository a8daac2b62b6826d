"""Lesson 05's recorder: `python -m accumlab.record memory` runs end to end (small sizes, on the
CPU with --allow-cpu) and writes a file the notebook's plots can read."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import accumlab as al
from accumlab.figures import figure_png
from accumlab.memory import record as recorder

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_record_memory_command_writes_labelled_results(tmp_path):
    env = {**os.environ, "ACCUMLAB_RECORD_SIZE": "small", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "accumlab.record", "memory", "--allow-cpu", "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((tmp_path / "memory.json").read_text())
    meta, res = record["meta"], record["results"]
    assert {"device", "torch", "cuda", "date", "command"} <= set(meta)
    assert "--allow-cpu" in meta["command"]
    assert res["size"] == "small"
    acts = res["memory"]["activations"]
    assert acts == sorted(acts, reverse=True) and acts[0] == 4 * acts[-1]
    assert [r["name"] for r in res["checkpointing"]["rows"]] == [
        "plain",
        "checkpointing",
        "accumulation",
        "both",
    ]
    c = res["choice"]
    assert c["micro_batch_size"] * c["accumulation_steps"] == res["memory"]["global_batch"]
    # the notebook draws recorded results with the same plot functions as local ones
    for fig in (
        al.memory.plot_memory_vs_k(res["memory"]),
        al.memory.plot_step_time(res["step_time"]),
        al.memory.plot_checkpointing(res["checkpointing"]),
    ):
        assert figure_png(fig).startswith(b"\x89PNG")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_record_refuses_cpu_without_flag(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "accumlab.record", "memory", "--out", str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode != 0 and "no CUDA device" in proc.stderr
    assert not (tmp_path / "memory.json").exists()


def test_unknown_size_is_a_clear_error():
    with pytest.raises(ValueError, match="ACCUMLAB_RECORD_SIZE"):
        recorder.record("huge")
