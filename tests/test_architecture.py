"""The folder tree is the architecture: core imports no topic, names resolve lazily, notebooks reach
the package one way, and building a model leaves the caller's random stream alone."""

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import accumlab as al

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "accumlab"
CORE_MODULES = sorted(
    p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__" and p.stem != "__main__"
)


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    return set(out.split())


def test_topics_are_folders_and_every_folder_is_a_topic():
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(al.TOPICS) | {"exercises"}


@pytest.mark.slow
def test_core_imports_no_topic():
    """Importing every core module in a fresh interpreter loads no topic folder."""
    imports = "; ".join(f"import accumlab.{m}" for m in CORE_MODULES)
    loaded = _loaded_after(imports)
    topics = sorted(
        m
        for m in loaded
        if m.split(".")[0] == "accumlab" and m.count(".") and m.split(".")[1] in al.TOPICS
    )
    assert topics == [], f"core imported topic modules: {topics}"


@pytest.mark.slow
def test_import_accumlab_imports_no_heavy_library():
    loaded = _loaded_after("import accumlab")
    heavy = sorted(m for m in loaded if m.split(".")[0] in {"torch", "matplotlib", "ipywidgets"})
    assert heavy == [], f"`import accumlab` imported {heavy[:5]}"


def test_every_listed_name_resolves():
    for name in al.__all__:
        assert getattr(al, name) is not None, name
    for topic in al.TOPICS:
        module = getattr(al, topic)
        for name in module.__all__:
            assert getattr(module, name) is not None, f"al.{topic}.{name}"


def test_unknown_names_are_attribute_errors_naming_them():
    with pytest.raises(AttributeError, match="'no_such_name'"):
        al.no_such_name  # noqa: B018
    with pytest.raises(AttributeError, match="'no_such_name'"):
        al.batchnorm.no_such_name  # noqa: B018


def test_no_module_shares_its_name_with_a_public_name_of_its_package():
    """Python binds an imported submodule as an attribute of its package: a module named like a
    public function would replace that function once imported."""
    for package in ("accumlab", *(f"accumlab.{t}" for t in al.TOPICS)):
        module = importlib.import_module(package)
        folder = Path(module.__file__).parent
        submodules = {p.stem for p in folder.glob("*.py")} | {
            p.name for p in folder.iterdir() if (p / "__init__.py").exists()
        }
        clash = submodules & (set(module.__all__) - set(getattr(module, "TOPICS", ())))
        assert not clash, f"{package}: {sorted(clash)}"


def test_audit_is_the_function_and_the_topic():
    assert callable(al.audit)
    assert callable(al.audit.catalogue_loop)


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebooks_reach_the_package_one_way(path):
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    code = "\n".join("".join(c["source"]) for c in cells)
    imports = re.findall(r"^\s*(?:from|import)\s+accumlab\b.*$", code, flags=re.M)
    assert {i.strip() for i in imports} <= {"import accumlab as al"}, imports
    private = re.findall(r"\bal\.(?:\w+\.)*_\w+", code)
    assert not private, private
    for topic, name in re.findall(r"\bal\.(\w+)\.(\w+)", code):
        if topic in al.TOPICS:
            assert name in getattr(al, topic).__all__, f"al.{topic}.{name} is not a public name"


def test_building_models_leaves_the_global_generator_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    al.mlp(4, norm="batch", seed=7)
    al.TinyLM(seed=7)
    assert torch.equal(torch.rand(3), expected)


# "about 300 lines": a little room, so a docstring or a table row does not force a split
MAX_LINES = 320


def test_no_module_is_longer_than_about_300_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by concern: {long}"
