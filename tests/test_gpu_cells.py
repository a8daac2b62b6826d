"""Lessons 05 and 06 with a GPU: every cell, run in this process on the simulated CUDA device of
tests/cuda_layer, so the `if env.gpu_count:` branches (the recorders run live, the asserts about the
allocator's blocks and segments, the float16 prediction checked) execute before any real GPU does.

The recorders' "full" sizes would take minutes on a CPU; they run at their "small" sizes here (the
same code). Figures are made but not shown; exercise cells run unanswered, as under nbmake.
"""

import json
from pathlib import Path

import pytest
from cuda_layer import SimulatedGpu

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _run_cells(path: Path) -> dict:
    namespace = {"display": lambda *a, **k: None, "__name__": "__main__"}
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        expected = "raises-exception" in cell["metadata"].get("tags", [])  # as nbmake reads it
        try:
            exec(compile(source, f"{path.name} cell {i}", "exec"), namespace)
        except Exception as err:
            if not expected:
                raise AssertionError(
                    f"{path.name} cell {i} failed on the simulated GPU: {err!r}"
                ) from err
    return namespace


@pytest.fixture
def small_recorders(monkeypatch):
    from accumlab.memory import record as memory_record
    from accumlab.precision import record as precision_record

    monkeypatch.setitem(memory_record.SIZES, "full", memory_record.SIZES["small"])
    monkeypatch.setitem(precision_record.SIZES, "full", precision_record.SIZES["small"])


@pytest.mark.slow
@pytest.mark.parametrize(
    "notebook", ["05_memory_and_throughput.ipynb", "06_amp_clipping_schedules.ipynb"]
)
def test_the_lessons_gpu_branches_run_on_a_simulated_gpu(notebook, small_recorders):
    with SimulatedGpu() as gpu:
        ns = _run_cells(NOTEBOOKS / notebook)
        assert ns["env"].gpu_count == 1 and ns["env"].device.type == "cuda"
        assert gpu.allocator.peak_allocated > 0  # the GPU branch allocated on the device
    if notebook.startswith("05"):
        live = ns["live"]
        assert live is not None and live["memory"]["device"].startswith("cuda")
        assert all(r is not None for r in live["allocator"]["reserved"])
    else:
        assert any(where.startswith("measured now") for where in ns["runs"])
