"""Lesson 00 (notebooks/00_start_here.ipynb): what its text says about this repository, and its
cells on a simulated GPU. Its explorer, plot and checkers are tested in test_widgets.py and
test_exercises.py."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_layer import SimulatedGpu

from accumlab import recorded

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks" / "00_start_here.ipynb"
NONE_SHIPS = "none ships with the suite yet"


def _markdown() -> str:
    cells = json.loads(LESSON.read_text())["cells"]
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return " ".join(text.split())  # a phrase may wrap across lines


def _shipped_results() -> list[Path]:
    """The result files the repository ships: those git tracks in accumlab/results/ (a file a
    GPU user recorded in their own clone does not ship); the folder itself outside a clone."""
    folder = recorded.RESULTS_DIR
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--", str(folder.relative_to(ROOT))],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return sorted(folder.glob("*.json"))
    return [ROOT / p for p in listed if p.endswith(".json")]


def _recorded_on_a_gpu(path: Path) -> bool:
    record = json.loads(path.read_text())
    return record.get("meta", {}).get("device") == "cuda"


def test_the_hardware_note_says_no_gpu_result_ships_only_while_none_does():
    gpu = [p.name for p in _shipped_results() if _recorded_on_a_gpu(p)]
    if gpu:
        assert NONE_SHIPS not in _markdown(), (
            f"accumlab/results/ ships GPU results ({', '.join(gpu)}), but lesson 00's hardware "
            f"note still says {NONE_SHIPS!r}: update it"
        )
    else:
        assert NONE_SHIPS in _markdown(), "lesson 00's hardware note should say that none ships"


def test_the_tripwire_sees_a_gpu_record(tmp_path):
    gpu = tmp_path / "memory.json"
    gpu.write_text(json.dumps({"meta": {"device": "cuda"}, "results": {}}))
    cpu = tmp_path / "amp.json"
    cpu.write_text(json.dumps({"meta": {"device": "cpu"}, "results": {}}))
    assert _recorded_on_a_gpu(gpu) and not _recorded_on_a_gpu(cpu)


def test_importing_accumlab_alone_seeds_nothing_and_sets_no_threads():
    """Lesson 00: "Importing accumlab alone does none of this" — in a fresh interpreter, the
    random generators' states and the libraries al.setup() touches stay as they were."""
    code = (
        "import random, sys; random.seed(7); before = random.getstate(); import accumlab; "
        "assert random.getstate() == before; "
        "print(sorted(m for m in ('torch', 'numpy', 'matplotlib', 'IPython') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]", out.stdout  # no torch: its threads and seed are untouched


@pytest.mark.slow
def test_lesson_00_runs_on_a_simulated_gpu():
    """Every code cell of lesson 00 in an IPython shell on the simulated CUDA device of
    tests/cuda_layer: the report's probe computes on "cuda", the rest stays on the CPU."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        with SimulatedGpu() as gpu:
            for i, cell in enumerate(json.loads(LESSON.read_text())["cells"]):
                if cell["cell_type"] != "code":
                    continue
                result = shell.run_cell("".join(cell["source"]), silent=True)
                assert result.success, f"lesson 00 cell {i} failed on the simulated GPU: {result}"
            env = shell.user_ns["env"]
            assert env.gpu_count == 1 and env.device.type == "cuda"
            assert gpu.allocator.peak_allocated > 0  # the probe allocated on the device
    finally:
        InteractiveShell.clear_instance()
