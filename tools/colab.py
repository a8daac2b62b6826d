"""Open any lesson in Google Colab: a badge per lesson, and a first code cell that installs accumlab
only where it is missing.

    python tools/colab.py          # badges in every lesson and the README map; install cells
    python tools/colab.py --check  # exit 1 if a lesson lacks them or carries an old copy

The badge opens `notebooks/NAME` at REF of the repository on GitHub; the install cell installs
accumlab from the same REF, so a learner who opened the lesson from its badge gets the package of
the same branch (a copy of the notebook from another commit still installs REF). Where accumlab is installed (make lab, Binder, a workstation) the cell does nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = "accumlab/accumlab"  # github.com/REPO
REF = "main"  # the branch (or tag) badges open and install cells install from
ROOT = Path(__file__).resolve().parents[1]
INSTALL_URL = f"git+https://github.com/{REPO}@{REF}"
INSTALL_CELL = f"""# Colab (or any machine without accumlab): install accumlab from {REF}, the branch the badge opens.
# Where accumlab is already installed — make lab, Binder, a workstation — this cell does nothing.
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("accumlab") is None:
    source = "accumlab @ {INSTALL_URL}"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", source], check=True)"""
INSTALL_ID = "colab-install"


def colab_url(notebook: Path) -> str:
    return f"https://colab.research.google.com/github/{REPO}/blob/{REF}/notebooks/{notebook.name}"


def badge(notebook: Path) -> str:
    image = "https://colab.research.google.com/assets/colab-badge.svg"
    return f"[![Open In Colab]({image})]({colab_url(notebook)})"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def sync(notebook: Path) -> bool:
    """Give `notebook` its badge (last line of the title cell) and install cell (first code cell).
    Returns True when the file changed."""
    original = notebook.read_text()
    nb = json.loads(original)
    title = nb["cells"][0]
    text = "".join(title["source"]).rstrip("\n")
    kept = [ln for ln in text.split("\n") if "colab-badge.svg" not in ln]
    while kept and not kept[-1].strip():
        kept.pop()
    title["source"] = _lines("\n".join([*kept, "", badge(notebook)]))
    # the install cell already there (by id, or by its first line) keeps its id
    first_line = INSTALL_CELL.split("\n", 1)[0]
    present = [
        c
        for c in nb["cells"]
        if c.get("id") == INSTALL_ID
        or (c["cell_type"] == "code" and "".join(c["source"]).startswith(first_line))
    ]
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "id": present[0].get("id", INSTALL_ID) if present else INSTALL_ID,
        "metadata": {},
        "outputs": [],
        "source": _lines(INSTALL_CELL),
    }
    nb["cells"] = [c for c in nb["cells"] if all(c is not p for p in present)]
    first_code = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    nb["cells"].insert(first_code, cell)
    updated = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if updated != original:
        notebook.write_text(updated)
    return updated != original


def sync_readme(readme: Path) -> bool:
    """Put each lesson's badge right after its link in the README's lesson map."""
    original = readme.read_text()
    lines = original.split("\n")
    for i, line in enumerate(lines):
        m = re.match(
            r"^(\| \d\d \| \[[^\]]*\]\(notebooks/([^)]+\.ipynb)\))( \[!\[Open In Colab\][^|]*)?( \|.*)$",
            line,
        )
        if m:
            lines[i] = f"{m.group(1)} {badge(Path(m.group(2)))}{m.group(4)}"
    updated = "\n".join(lines)
    if updated != original:
        readme.write_text(updated)
    return updated != original


def lessons() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = []
    for path in [ROOT / "README.md", *lessons()]:
        update = sync_readme if path.suffix == ".md" else sync
        if args.check:
            before = path.read_text()
            if update(path):
                stale.append(path.name)
                path.write_text(before)
        elif update(path):
            print(f"updated {path.name}")
    if stale:
        print("no Colab badge or install cell, or an old one: " + ", ".join(stale))
        print("run: python tools/colab.py")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
