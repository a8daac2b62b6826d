"""The README is the map; the measured tables live in docs/measurements.md, and every benchmark
that writes a table writes it there."""

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "measurements.md"
MARKERS = {"bench": "tools/bench_notebooks.py", "widgets": "benchmarks/widget_latency.py",
           "busy": "benchmarks/busy_core.py"}  # fmt: skip


def test_measured_tables_are_on_their_page_not_in_the_readme():
    readme, page = (ROOT / "README.md").read_text(), PAGE.read_text()
    for name, writer in MARKERS.items():
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        assert start in page and end in page, f"{PAGE.name} lacks the markers {writer} writes"
        assert start not in readme, f"README still holds the {name} table"
        assert start in (ROOT / writer).read_text(), writer
    assert "| notebook | wall time (s) |" not in readme


def test_make_bench_writes_every_table_to_the_page():
    bench = (ROOT / "Makefile").read_text().split("\nbench:", 1)[1].split("\n\n", 1)[0]
    for writer in MARKERS.values():
        line = next(ln for ln in bench.replace("\\\n", " ").splitlines() if writer in ln)
        assert "--page docs/measurements.md" in line, line


def test_busy_core_writes_between_its_markers(tmp_path):
    spec = importlib.util.spec_from_file_location("busy_core", ROOT / "benchmarks/busy_core.py")
    busy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(busy)
    page = tmp_path / "measurements.md"
    page.write_text("before\n<!-- busy:start -->\nold\n<!-- busy:end -->\nafter\n")
    table = tmp_path / "table.md"
    table.write_text("| new | table |\n")
    code = busy.main(["--page", str(page), "--table", str(table), "--", sys.executable, "-c", ""])
    assert code == 0
    text = page.read_text()
    assert re.search(
        r"<!-- busy:start -->\nWith one core kept busy.*\n\n\| new \| table \|\n<!-- busy:end -->\nafter",
        text,
    )
    assert "old" not in text and text.startswith("before\n")
