"""Run a command while another process keeps one CPU core busy (a shared or quota-limited machine).

    python benchmarks/busy_core.py -- python tools/bench_notebooks.py notebooks --out benchmarks/notebooks_busy_core.md
    python benchmarks/busy_core.py --page docs/measurements.md --table benchmarks/notebooks_busy_core.md -- CMD ...

The busy process is a Python loop that never sleeps (`while True: pass`), started before the
command and stopped after it; the load average is printed at both ends. With `--page`, the
Markdown file `--table` (written by the command) is copied between the busy-core markers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

MARKERS = ("<!-- busy:start -->", "<!-- busy:end -->")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", type=Path, help="copy --table between the busy-core markers")
    parser.add_argument("--table", type=Path, help="the Markdown table the command writes")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    before = os.getloadavg()[0]
    try:
        code = subprocess.run(command).returncode
    finally:
        busy.kill()  # our own child, by its handle
        busy.wait()
    after = os.getloadavg()[0]
    shown = ["python" if Path(a).name.startswith("python") and "/" in a else a for a in command]
    note = (
        f"With one core kept busy by `while True: pass` in another process "
        f"(`python benchmarks/busy_core.py -- {' '.join(shown)}`, {dt.date.today().isoformat()}); "
        f"load average (1 min) {before:.2f} at the start, {after:.2f} at the end."
    )
    print(note)
    if args.page and code == 0:
        if args.table is None:
            parser.error("--page needs --table")
        text = args.page.read_text()
        start, end = MARKERS
        if start not in text or end not in text:
            raise SystemExit(f"{args.page} has no {start} ... {end} markers")
        head, rest = text.split(start, 1)
        table = args.table.read_text().strip()
        args.page.write_text(f"{head}{start}\n{note}\n\n{table}\n{end}{rest.split(end, 1)[1]}")
    return code


if __name__ == "__main__":
    sys.exit(main())
