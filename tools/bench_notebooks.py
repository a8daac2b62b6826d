"""Execute every lesson and record its wall time and peak kernel memory.

    python tools/bench_notebooks.py notebooks --out benchmarks/notebooks.md

Each notebook runs in a fresh subprocess that starts one kernel; the kernel's peak resident memory
is that subprocess's RUSAGE_CHILDREN maxrss (the largest descendant waited for, i.e. the kernel or
a process it spawned). Wall time includes kernel start, as under `pytest --nbmake`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

TARGET_S, TARGET_MB = 30.0, 1536.0


def run_one(path: Path, timeout: int) -> dict:
    import resource

    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    wall = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    return {"notebook": path.name, "wall_s": round(wall, 1), "peak_mb": round(peak_kb / 1024, 0)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["notebooks"])
    parser.add_argument("--out", type=Path, help="write a Markdown table here")
    parser.add_argument(
        "--page", type=Path, help="also replace the table between the bench markers of this file"
    )
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    parser.add_argument(
        "--one", type=Path, help=argparse.SUPPRESS
    )  # internal: run one notebook, print JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.timeout)))
        return 0
    notebooks = sorted(
        p for a in args.paths for p in (Path(a).glob("*.ipynb") if Path(a).is_dir() else [Path(a)])
    )
    rows, failed = [], False
    total_start = time.perf_counter()
    for nb in notebooks:
        proc = subprocess.run(
            [sys.executable, __file__, "--one", str(nb), "--timeout", str(args.timeout)],
            capture_output=True,
            text=True,
            timeout=args.timeout * 4,
        )
        if proc.returncode:
            print(f"{nb.name}: FAILED\n{proc.stderr[-2000:]}", file=sys.stderr)
            failed = True
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["ok"] = row["wall_s"] <= TARGET_S and row["peak_mb"] <= TARGET_MB
        rows.append(row)
        print(
            f"{row['notebook']:45s} {row['wall_s']:6.1f} s {row['peak_mb']:7.0f} MB {'ok' if row['ok'] else 'OVER TARGET'}"
        )
    total = time.perf_counter() - total_start
    lines = [
        f"Measured {dt.date.today().isoformat()} on {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, torch {__import__('torch').__version__}, with "
        f"`python tools/bench_notebooks.py notebooks` (targets: ≤ {TARGET_S:.0f} s, ≤ {TARGET_MB:.0f} MB each).",
        "",
        "| notebook | wall time (s) | peak kernel memory (MB) | within target |",
        "|---|---:|---:|:---:|",
        *[
            f"| {r['notebook']} | {r['wall_s']:.1f} | {r['peak_mb']:.0f} | {'✓' if r['ok'] else '✗'} |"
            for r in rows
        ],
        f"| **all, one after another** | **{total:.1f}** | | |",
    ]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")
        print(f"wrote {args.out}")
    if args.page and not failed:
        text = args.page.read_text()
        start, end = "<!-- bench:start -->", "<!-- bench:end -->"
        if start not in text or end not in text:
            raise SystemExit(f"{args.page} has no {start} ... {end} markers")
        head, rest = text.split(start, 1)
        args.page.write_text(
            head + start + "\n" + "\n".join(lines) + "\n" + end + rest.split(end, 1)[1]
        )
        print(f"updated {args.page}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
