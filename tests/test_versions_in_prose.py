"""No lesson types a library version: the version a reader has is the one a cell prints.

A lesson's markdown and its code comments may not name a version of a library it uses (`torch
2.13`, `transformers>=5.23`, `Lightning 2.6's ...`), since the next release makes the sentence
false while the lesson still passes. A behaviour that depends on the version says from which
release it holds and cites the change, with a link on the same line. A lesson that says it
measured something with a framework prints the installed versions (`al.frameworks.versions()`).
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LIBRARIES = (
    "torch|pytorch|transformers|accelerate|lightning|pytorch-lightning|deepspeed|numpy|"
    "matplotlib|ipywidgets|jupyterlab|jupyter|torchviz|tqdm|triton|diffusers|megatron(?:-lm)?|"
    "torchtitan|open_clip|python|cuda|nccl"
)
# the name, then (an optional 's, a comparison or `v`) and a dotted version or a major `v5`;
# `torch.tensor(2.0)` is code, not a version: the name must not be followed by `.` or `(`
VERSION = re.compile(
    rf"(?<![\w./-])(?:{LIBRARIES})(?!\.\w|\()(?:'s)?\s*(?:[<>=!~]=?\s*|\s+v?|v)"
    r"(\d+\.\d+(?:\.\d+)*|\d+\.x)\b",
    re.I,
)
CITATION = re.compile(r"\]\(https?://[^)]*(?:/pull/|/releases|/commit/|changelog|release)", re.I)
# lessons that say "measured with" a framework without printing its version yet (the cell they
# need is theirs to add): strict, so the entry must go once the lesson prints it
UNPRINTED: set[str] = set()


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """(cell index, line) for every markdown line and every code comment of a lesson."""
    found = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        for line in "".join(cell["source"]).splitlines():
            if cell["cell_type"] == "markdown":
                found.append((i, line))
            elif cell["cell_type"] == "code" and "#" in line:
                found.append((i, line[line.index("#") :]))
    return found


def typed_versions(lines: list[tuple[int, str]]) -> list[str]:
    return [
        f"cell {i}: {m.group(0)!r} in {line.strip()[:100]!r}"
        for i, line in lines
        for m in VERSION.finditer(line)
        if not CITATION.search(line)
    ]


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_types_no_library_version(path):
    assert typed_versions(prose_lines(path)) == []


@pytest.mark.parametrize(
    "line",
    [
        "measured with transformers 5.23, the Trainer divides",
        "Lightning 2.6's `WeightAveraging` callback",
        "needs `torch>=2.4` for pipelining",
        "# PyTorch 2.13 added grad_dtype",
        "on torch v2.5 the default changed",
        "DeepSpeed 0.19.8 runs on the CPU",
        "with numpy==2.4.6 installed",
        "CUDA 12.4 and NCCL 2.21",
        "Transformers 5.x divides by the window",
    ],
)
def test_a_typed_version_is_found(line):
    assert typed_versions([(0, line)]), line


@pytest.mark.parametrize(
    "line",
    [
        "s = torch.tensor(2.0, requires_grad=True)",
        "`torch.distributed.pipelining` runs 2 processes",
        "Accelerate's `zero_grad()` on every one of the 4 micro-batches",
        "Lightning divides by k = 4 (2 ranks, 1.5 s)",
        "a 1.5 GB limit; lesson 2.3 of the exercises",
        "grad_dtype exists from torch 2.13 ([the PR](https://github.com/pytorch/pytorch/pull/1))",
    ],
)
def test_code_numbers_and_cited_changes_are_not_versions(line):
    assert typed_versions([(0, line)]) == []


MEASURED_WITH = re.compile(
    r"measured (?:with|on) (?:the (?:real|installed) )?(accelerate|lightning|transformers|"
    r"the transformers|deepspeed|the trainer)",
    re.I,
)


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="prints no framework version"))
        if p.stem in UNPRINTED
        else p
        for p in LESSONS
    ],
    ids=[p.stem for p in LESSONS],
)
def test_a_lesson_measured_with_a_framework_prints_its_version(path):
    cells = json.loads(path.read_text())["cells"]
    prose = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    if MEASURED_WITH.search(prose.replace("\n", " ")):
        assert "al.frameworks.versions()" in code, "says 'measured with', prints no version"
