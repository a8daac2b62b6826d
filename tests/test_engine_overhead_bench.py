"""The engine-overhead benchmark runs, checks both loops agree, and reports ratios (tiny sizes)."""

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "engine_overhead.py"


@pytest.mark.slow
def test_benchmark_runs_on_tiny_sizes(monkeypatch, capsys, tmp_path):
    spec = importlib.util.spec_from_file_location("engine_overhead", PATH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setitem(bench.SIZES, "cpu", (8, 2, 16, 4, 2))
    out = tmp_path / "table.md"
    assert (
        bench.main(["--repeats", "1", "--device", "cpu", "--profile", "--markdown", str(out)]) == 0
    )
    text = out.read_text()
    assert (
        "hand-written loop | " in text
        and "al.run (default)" in text
        and "record_windows=False" in text
    )
    assert "| record_grads=True | " in text
    assert "Command: `python benchmarks/engine_overhead.py --repeats 1" in text
    with pytest.raises(SystemExit):
        bench.main(["--repeats", "0"])
