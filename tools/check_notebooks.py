"""Fail when a committed notebook carries outputs, execution counts, a cell without an id (nbformat
4.5 requires one), or a kernelspec other than python3."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def problems(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    found = []
    kernel = nb.get("metadata", {}).get("kernelspec", {}).get("name")
    if kernel != "python3":
        found.append(f"kernelspec.name is {kernel!r}, not 'python3'")
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("outputs"):
            found.append(f"cell {i} has outputs")
        if cell.get("execution_count") is not None:
            found.append(f"cell {i} has an execution count")
        if nb.get("nbformat_minor", 0) >= 5 and not cell.get("id"):
            found.append(f"cell {i} has no id")
    return found


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path("notebooks")]
    paths = sorted(
        p
        for r in roots
        for p in ([r] if r.is_file() else r.rglob("*.ipynb"))
        if ".ipynb_checkpoints" not in p.parts
    )
    bad = 0
    for path in paths:
        for problem in problems(path):
            print(f"{path}: {problem}")
            bad += 1
    if bad:
        print(
            f"{bad} problem(s): strip outputs before committing (e.g. `jupyter nbconvert --clear-output --inplace`)"
        )
        return 1
    print(f"{len(paths)} notebook(s) stripped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
