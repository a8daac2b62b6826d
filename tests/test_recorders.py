"""`python -m accumlab.record memory|amp|dist --device cpu --out PATH`: the three recorders run end
to end on the CPU (the code a GPU run executes), write the schema the lessons read, labelled
"device": "cpu", and are refused where GPU results live (lessons 05–07)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import accumlab as al
from accumlab import record, recorded

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("records")
    # one through the real entry point, the others in-process (same main())
    proc = subprocess.run(
        [sys.executable, "-m", "accumlab.record", "memory", "--device", "cpu", "--out", str(out)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert record.main(["amp", "--device", "cpu", "--out", str(out / "amp.json")]) == 0
    assert record.main(["dist", "--device", "cpu", "--out", str(out)]) == 0
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["memory", "amp", "dist"])
def test_each_recorder_writes_its_schema_labelled_cpu(records, name):
    rec = json.loads((records / f"{name}.json").read_text())
    recorded.validate(name, rec)  # raises on any departure from the schema
    meta = rec["meta"]
    assert (meta["device"], meta["size"], meta["device_count"]) == ("cpu", "small", 0)
    assert f"accumlab.record {name} --device cpu" in meta["command"]
    assert al.describe_recorded(rec).startswith("CPU STAND-IN run")
    assert "Not a GPU measurement" in al.describe_recorded(rec)


@pytest.mark.slow
def test_lessons_read_stand_in_files_from_the_test_folder(records, monkeypatch):
    monkeypatch.setenv(recorded.RESULTS_ENV, str(records))
    for name in ("memory", "amp", "dist"):
        assert al.load_recorded(name)["meta"]["device"] == "cpu"


@pytest.mark.slow
def test_recorded_relations_hold_on_the_stand_in(records):
    amp = json.loads((records / "amp.json").read_text())["results"]
    assert amp["autocast_dtype"] == "float16"  # the dtype a GPU run uses, on the CPU too
    ok, silent = amp["orders"]["correct"], amp["orders"]["unscale_update_every_micro_step"]
    assert ok["skipped"] == amp["reference_skipped"] and ok["scale_changes_inside_windows"] == 0
    # the prediction for the GPU: the "silent" order doubles the scale into float16 overflows
    assert sum(silent["skipped"]) > sum(ok["skipped"])
    assert "skipped windows" in al.precision.amp_report(amp)
    dist = json.loads((records / "dist.json").read_text())["results"]["runs"]["main"]
    assert all(al.dist.checks(dist).values()), al.dist.checks(dist)
    assert (
        list(dist)
        and "nccl_one_rank"
        not in json.loads((records / "dist.json").read_text())["results"]["runs"]
    )


def test_schema_problems_are_listed():
    with pytest.raises(ValueError, match=r"results: missing key 'size'"):
        recorded.validate("memory", {"meta": {}, "results": {}})
    assert recorded.check_schema([1, 2.5], [float]) == []
    assert recorded.check_schema(True, int) != []  # a bool is not a count
    assert recorded.check_schema(None, (int, type(None))) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["memory", "--device", "cpu"], "needs --out"),
        (["memory", "--device", "cpu", "--out", str(recorded.RESULTS_DIR)], "GPU results only"),
        (["memory", "--device", "cpu", "--out", "/nonexistent/x/memory.json"], "does not exist"),
        (["nope", "--device", "cpu", "--out", "/tmp"], "invalid choice"),
    ],
)
def test_cli_refuses_before_running(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        record.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_cuda_default_is_refused_without_a_gpu(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        record.main(["memory", "--out", str(tmp_path)])
    assert exc.value.code == 2 and "no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "memory.json").exists()


def test_package_results_hold_only_gpu_files(tmp_path, monkeypatch):
    for path in recorded.RESULTS_DIR.glob("*.json"):
        assert json.loads(path.read_text())["meta"]["device"] == "cuda", path
    # a CPU file put there by hand is refused when a lesson loads it
    fake = tmp_path / "results"
    fake.mkdir()
    monkeypatch.setattr(recorded, "RESULTS_DIR", fake)
    monkeypatch.delenv(recorded.RESULTS_ENV, raising=False)
    meta = recorded.machine_meta("amp", "python -m accumlab.record amp", "cpu", "small")
    (fake / "amp.json").write_text(json.dumps({"meta": meta, "results": {}}))
    with pytest.raises(ValueError):
        al.load_recorded("amp")


# --- the lessons' GPU branches, executed on the CPU stand-in --------------------------------------

NOTEBOOKS = ROOT / "notebooks"


def _execute(name: str, env: dict) -> list:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
        ).execute()
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    # every error surfaces as an exception above, except the cells that raise on purpose
    return [
        "".join(o.get("text", "") for o in c.outputs if o.get("output_type") == "stream")
        for c in nb.cells
        if c.cell_type == "code"
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "05_memory_and_throughput.ipynb",
            ["measured now on CPU stand-in", "probe on CPU stand-in"],
        ),
        ("06_amp_clipping_schedules.ipynb", ["measured now on CPU stand-in", "autocast float16"]),
        ("07_ddp_fsdp_sync.ipynb", ["CPU STAND-IN run"]),
    ],
)
def test_gpu_branches_run_on_the_cpu_stand_in(records, name, expected):
    env = {"ACCUMLAB_GPU_STANDIN": "cpu", recorded.RESULTS_ENV: str(records)}
    text = "\n".join(_execute(name, env))
    assert "STAND-IN" in text  # al.setup() announced it
    assert "CPU STAND-IN run" in text  # the recorded-result cells rendered the stand-in file
    for phrase in expected:
        assert phrase in text, phrase
