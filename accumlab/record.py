"""Record GPU reference results: `python -m accumlab.record NAME [--out DIR]` (lessons 05–07).

Each NAME is recorded by the `record` module of the topic it belongs to (`RECORDERS`), which exposes
`record() -> dict`; the result is written
with device, torch and CUDA versions and the date to accumlab/results/NAME.json (or --out DIR), so
CPU-only machines can show it, labelled with where it came from.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from . import recorded

# NAME -> the topic module that records it (each lesson's GPU section reads NAME.json)
RECORDERS = {
    "memory": "accumlab.memory.record",  # lesson 05
    "amp": "accumlab.precision.record",  # lesson 06
    "dist": "accumlab.dist.record",  # lesson 07
}


def available() -> list[str]:
    return sorted(RECORDERS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m accumlab.record", description=__doc__.splitlines()[0]
    )
    parser.add_argument("name", choices=available(), help="which experiment to record")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory for NAME.json (default: the package's results/)",
    )
    parser.add_argument(
        "--allow-cpu",
        action="store_true",
        help="run without a GPU (for testing the recorder itself)",
    )
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available() and not args.allow_cpu:
        parser.error(
            "no CUDA device found: GPU reference results must come from a GPU (use --allow-cpu to test)"
        )
    module = importlib.import_module(RECORDERS[args.name])
    results = module.record()
    command = "python -m accumlab.record " + " ".join(argv if argv is not None else sys.argv[1:])
    path = recorded.save(args.name, results, command, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
