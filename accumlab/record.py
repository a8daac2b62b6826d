"""Record the lessons' GPU results: `python -m accumlab.record NAME` (lessons 05–07).

On a GPU it writes accumlab/results/NAME.json (device, torch and CUDA versions, date, command),
which the lessons show on machines without one. `--device cpu --out PATH` runs the very same code
on the CPU, with small sizes, and writes a file of the same schema labelled `"device": "cpu"`:
the tests do this, so a first GPU run is never the first time a recorder executes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import recorded


def available() -> list[str]:
    return sorted(recorded.RECORDERS)


def output_path(name: str, out: Path | None) -> Path:
    """--out PATH: a file when it ends in .json, else a folder for NAME.json (default: the
    package's results/)."""
    if out is None:
        return recorded.RESULTS_DIR / f"{name}.json"
    return out if out.suffix == ".json" else out / f"{name}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m accumlab.record", description=__doc__.splitlines()[0]
    )
    parser.add_argument("name", choices=available(), help="which experiment to record")
    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cuda (default): a reference result; cpu: the same code path on the CPU (needs --out)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="NAME.json's folder, or a path ending in .json"
    )
    parser.add_argument(
        "--size",
        choices=("small", "full"),
        default=None,
        help="sizes of the experiment (default: full on cuda, small on cpu)",
    )
    args = parser.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error(
            "no CUDA device found: reference results must come from a GPU "
            "(--device cpu --out PATH runs the same code on the CPU)"
        )
    path = output_path(args.name, args.out)
    if args.device == "cpu" and (args.out is None or recorded.is_package_results(path)):
        parser.error("--device cpu needs --out PATH outside accumlab/results/ (GPU results only)")
    if args.out is not None and not path.parent.exists() and args.out.suffix == ".json":
        parser.error(f"--out {args.out}: folder {path.parent} does not exist")
    size = args.size or ("full" if args.device == "cuda" else "small")
    results = recorded.recorder(args.name).record(device=args.device, size=size)
    command = "python -m accumlab.record " + " ".join(argv if argv is not None else sys.argv[1:])
    path = recorded.save(args.name, results, command, path, device=args.device, size=size)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
