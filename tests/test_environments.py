"""binder/ and environment.yml cannot be solved here (no conda-forge, no Docker): check them
statically — they parse, and each names every runtime dependency of pyproject.toml."""

import os
import re
import stat
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
# pyproject name → the names a conda environment may use for it
CONDA_NAMES = {
    "torch": {"pytorch", "pytorch-cpu", "pytorch-gpu"},
    "matplotlib": {"matplotlib", "matplotlib-base"},
}


def runtime_dependencies() -> list[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return [re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in deps]


def names_in(env_file: Path) -> set[str]:
    env = yaml.safe_load(env_file.read_text())
    names = set()
    for dep in env["dependencies"]:
        items = dep["pip"] if isinstance(dep, dict) else [dep]
        for item in items:
            names.add(re.split(r"[<>=!~\[ ]", item.strip(), maxsplit=1)[0].lower())
    return names


@pytest.mark.parametrize("path", ["binder/environment.yml", "environment.yml"])
def test_environment_names_every_runtime_dependency(path):
    names = names_in(ROOT / path)
    env = yaml.safe_load((ROOT / path).read_text())
    assert env["channels"] == ["conda-forge"]
    for dep in runtime_dependencies():
        assert CONDA_NAMES.get(dep, {dep}) & names, f"{path} lacks {dep}"


# what an environment file may name beyond pyproject's runtime dependencies, and why
ENV_EXTRAS = {
    "python": "the interpreter",
    "pip": "installs accumlab itself",
    "python-graphviz": "Graphviz's `dot`, so lesson 01 draws pictures (optional at run time)",
    "jupyterlab": "the `lab` extra: where the lessons are opened",
}


def conda_to_pypi(name: str) -> str:
    for pypi, conda in CONDA_NAMES.items():
        if name in conda:
            return pypi
    return name


@pytest.mark.parametrize("path", ["binder/environment.yml", "environment.yml"])
def test_environment_names_exactly_the_dependencies(path):
    """pyproject.toml is the one source of truth: an environment file names its runtime
    dependencies and nothing else but the documented extras."""
    names = {conda_to_pypi(n) for n in names_in(ROOT / path)} - {"--editable"}
    extra = names - set(runtime_dependencies()) - set(ENV_EXTRAS)
    assert not extra, f"{path} names {sorted(extra)}, which pyproject.toml does not require"


def test_lab_extra_holds_jupyterlab_and_dev_includes_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "jupyterlab" not in runtime_dependencies()  # Colab keeps its own Jupyter server
    assert any(d.startswith("jupyterlab") for d in project["optional-dependencies"]["lab"])
    assert "accumlab[lab]" in project["optional-dependencies"]["dev"]


def test_binder_pins():
    env = yaml.safe_load((ROOT / "binder/environment.yml").read_text())
    deps = [d for d in env["dependencies"] if isinstance(d, str)]
    for want in (
        "python=3.12",
        "pytorch-cpu",
        "python-graphviz",
        "matplotlib-base",
        "ipywidgets=8",
        "jupyterlab=4",
        "setuptools",
    ):
        assert want in deps, want
    assert "pytorch" not in deps  # the CUDA build would not fit a Binder pod


@pytest.mark.parametrize("script", ["binder/postBuild", "binder/start"])
def test_binder_scripts_are_executable_bash(script):
    path = ROOT / script
    assert path.stat().st_mode & stat.S_IXUSR, f"{script} is not executable"
    text = path.read_text()
    assert text.startswith("#!/bin/bash\n")


def test_post_build_is_strict_and_installs_accumlab_without_dependencies():
    text = (ROOT / "binder/postBuild").read_text()
    assert "set -euo pipefail" in text
    assert re.search(r"pip install .*--no-deps.* \.$", text, re.M)


def test_start_caps_threads_and_execs():
    lines = [
        ln
        for ln in (ROOT / "binder/start").read_text().splitlines()
        if ln and not ln.startswith("#")
    ]
    assert "OMP_NUM_THREADS=1" in " ".join(lines)
    assert lines[-1] == 'exec "$@"'


def test_readme_binder_badge_opens_lesson_00():
    readme = (ROOT / "README.md").read_text()
    assert "mybinder.org/v2/gh/" in readme
    assert "urlpath=lab/tree/notebooks/00_start_here.ipynb" in readme


def test_ci_script_is_executable():
    assert os.access(ROOT / ".ci/run", os.X_OK)


def test_readme_commands_are_make_targets():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"^make ([a-z-]+)", readme, re.M) + ["lab", "test"]:
        assert re.search(rf"^{target}:", makefile, re.M), (
            f"README names `make {target}`, Makefile lacks it"
        )
    assert re.search(r"^test:.*\n\t\$\(BIN\)/pytest --nbmake", makefile, re.M)
    assert "make test" in (ROOT / ".ci/run").read_text()


def test_readme_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
