"""How much `import accumlab` costs next to `import torch`, each in a fresh interpreter.

    python benchmarks/import_time.py [--repeats 7]

Runs the statements below alternately, `repeats` times each, and prints the median wall time of
each and its ratio to `import torch` (ratios within one run: the machine's load cancels out).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

STATEMENTS = {
    "import torch": "import torch",
    "import accumlab": "import accumlab",
    "import accumlab; al.run (core engine)": "import accumlab as al; al.run",
    "... + al.batchnorm.gradient_mismatch (a topic)": (
        "import accumlab as al; al.run; al.batchnorm.gradient_mismatch"
    ),
    "... + al.setup() (matplotlib formatter)": "import accumlab as al; al.setup()",
}


def wall(statement: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    times: dict[str, list[float]] = {label: [] for label in STATEMENTS}
    wall("import torch")  # warm the file cache once
    for _ in range(args.repeats):
        for label, statement in STATEMENTS.items():
            times[label].append(wall(statement))
    base = statistics.median(times["import torch"])
    print("| statement (fresh interpreter) | median wall time (s) | × import torch |")
    print("|---|---:|---:|")
    for label, values in times.items():
        median = statistics.median(values)
        print(f"| `{label}` | {median:.2f} | {median / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
