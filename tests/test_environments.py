"""One tested set of versions everywhere: constraints.txt is generated from a passing run, and
make, CI, Binder and the conda file all install with it; pyproject's lower bounds are versions
the suite ran on. Checked statically here (no conda-forge, no Docker on this machine)."""

import os
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import lock  # noqa: E402

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PINS = lock.parse_pins((ROOT / "constraints.txt").read_text())


def name_of(requirement: str) -> str:
    return lock.canonical(re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0])


def direct_requirements() -> list[str]:
    project = PYPROJECT["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += [r for r in extra if not r.startswith("accumlab[")]
    return reqs


def test_lock_is_generated_and_pins_every_direct_requirement():
    text = (ROOT / "constraints.txt").read_text()
    header = lock.lock_header()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", header["date"])
    assert "never edit by hand" in text
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert all(re.fullmatch(r"[a-z0-9-]+==[^\s+]+", ln) for ln in lines), "one name==version a line"
    assert len(lines) == len(PINS)
    missing = {name_of(r) for r in direct_requirements()} - set(PINS)
    assert not missing, f"constraints.txt does not pin {sorted(missing)}"
    assert "accumlab" not in PINS and "pip" not in PINS


def untested_floors(floors: dict, pins: dict, line: str, recorded: dict) -> list[str]:
    """The lower bounds that are neither the tested version nor the floor of the last recorded
    floors run (which must have passed, with exactly the floors pyproject.toml states now)."""
    floors_run_counts = "passed" in line and "FAILED" not in line and recorded == floors
    return [
        f"{name}>={floor}"
        for name, floor in floors.items()
        if name not in pins or (pins[name] != floor and not floors_run_counts)
    ]


@pytest.mark.skipif(
    os.environ.get("ACCUMLAB_FLOORS_RUN") == "1",
    reason="this is the floors run (make test-floors): the record it checks is what it writes",
)
def test_every_lower_bound_is_a_version_the_suite_passed_with():
    line, recorded = lock.recorded_floors()
    assert untested_floors(lock.lower_bounds(), PINS, line, recorded) == []


def test_an_untested_floor_is_caught(tmp_path):
    text = (ROOT / "pyproject.toml").read_text().replace('"tqdm>=', '"tqdm>=0.0.1,<99,>=')
    changed = tmp_path / "pyproject.toml"
    changed.write_text(text)
    floors = lock.lower_bounds(changed)
    assert floors["tqdm"] == "0.0.1"
    passed = "Lower bounds (`make test-floors`, 2026-01-01, Python 3.11.7): the suite passed"
    # a floors run that tested other floors does not count, nor does one that failed
    off_lock = [f"{n}>={f}" for n, f in floors.items() if PINS.get(n) != f]
    assert "tqdm>=0.0.1" in off_lock
    assert untested_floors(floors, PINS, passed, {**floors, "tqdm": "4.0"}) == off_lock
    failed = passed.replace("passed", "FAILED (pytest exit status 1)")
    assert "tqdm>=0.0.1" in untested_floors(floors, PINS, failed, floors)
    assert untested_floors(floors, PINS, passed, floors) == []
    assert untested_floors({"nowhere": "1.0"}, PINS, passed, {"nowhere": "1.0"}) == ["nowhere>=1.0"]


def test_torch_floor_covers_what_the_lessons_use():
    floor = lock.lower_bounds()["torch"]
    assert tuple(int(p) for p in floor.split(".")[:2]) >= (2, 13)  # `grad_dtype`, lesson 12


def test_locking_refuses_an_environment_that_changed_since_it_passed(tmp_path, monkeypatch):
    record = {"date": "2026-01-01", "command": "pytest --nbmake", "python": "3.11.7 x86_64",
              "system": "Linux", "pins": {"torch": "2.13.0"}}  # fmt: skip
    (tmp_path / lock.PASSED).write_text(__import__("json").dumps(record))
    monkeypatch.setattr(lock, "installed", lambda venv: {"torch": "2.14.1"})
    with pytest.raises(SystemExit, match="changed since its passing run"):
        lock.passed_record(tmp_path)
    with pytest.raises(SystemExit, match="no passing run"):
        lock.passed_record(tmp_path / "elsewhere")
    monkeypatch.setattr(lock, "installed", lambda venv: {"torch": "2.13.0"})
    assert "torch==2.13.0" in lock.lock_text(lock.passed_record(tmp_path), tmp_path)


@pytest.mark.skipif(
    os.environ.get("ACCUMLAB_TESTED_SET") != "1",
    reason="only `make test` (which sets ACCUMLAB_TESTED_SET=1) runs in the tested set",
)
def test_make_test_runs_in_exactly_the_tested_set():
    """What `make` installed is constraints.txt, package for package: nothing unpinned, no
    version that the lock does not name."""
    now = lock.installed(Path(sys.prefix))
    assert {n: (PINS.get(n), v) for n, v in now.items() if PINS.get(n) != v} == {}
    assert set(PINS) - set(now) == set()


def test_local_version_labels_are_dropped():
    assert lock.parse_pins("torch==2.13.0+cpu\n-e git+x#egg=y\n# c\nNumPy==2.4.6") == {
        "torch": "2.13.0",
        "numpy": "2.4.6",
    }


def test_make_installs_the_tested_set_and_ci_uses_make():
    makefile = (ROOT / "Makefile").read_text()
    install = makefile.split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    assert "$(CONSTRAINTS)" in install.splitlines()[0]  # a new lock reinstalls
    assert "-c $(CONSTRAINTS) -e '.[dev]'" in install
    assert "-c $(CONSTRAINTS) $(TORCH_SPEC)" in install
    assert re.search(r"^CONSTRAINTS \?= constraints\.txt$", makefile, re.M)
    for target in ("lab", "test", "lock", "test-latest", "test-floors", "book", "test-book"):
        assert re.search(rf"^{target}:", makefile, re.M), target
    ci = (ROOT / ".ci/run").read_text()
    assert "make test" in ci and "pip install" not in ci


def test_conda_file_installs_the_tested_set_with_pip():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    python = ".".join(lock.lock_header()["python"].split(".")[:2])
    assert conda == [f"python={python}", "python-graphviz", "pip"]  # nothing conda resolves itself
    assert pip == ["-c constraints.txt", "--editable .[dev]"]


def test_binder_installs_the_tested_set_with_pip():
    binder = ROOT / "binder"
    assert not (binder / "environment.yml").exists()  # repo2docker would take conda's route
    python = ".".join(lock.lock_header()["python"].split(".")[:2])
    assert (binder / "runtime.txt").read_text().strip() == f"python-{python}"
    lines = [
        ln.split("#", 1)[0].strip()
        for ln in (binder / "requirements.txt").read_text().splitlines()
        if ln.split("#", 1)[0].strip()
    ]
    assert lines == [
        "--extra-index-url https://download.pytorch.org/whl/cpu",  # torch's CPU build
        "-c ../constraints.txt",  # pip reads a nested file's path relative to the file
        "-e .[lab]",  # and a package's path relative to where it runs: the repository root
    ]
    assert (binder / "requirements.txt").parent.joinpath("../constraints.txt").resolve() == (
        ROOT / "constraints.txt"
    )
    assert "graphviz" in (binder / "apt.txt").read_text().split()


def test_lab_extra_holds_jupyterlab_and_dev_includes_it():
    project = PYPROJECT["project"]
    assert "jupyterlab" not in [name_of(d) for d in project["dependencies"]]  # Colab keeps its own
    assert any(d.startswith("jupyterlab") for d in project["optional-dependencies"]["lab"])
    assert "accumlab[lab,book]" in project["optional-dependencies"]["dev"]


def test_readme_records_the_last_runs_with_dates():
    """The README says when the newest versions and the floors were last tried, and how it went
    (or that a run has not been made yet); the lock file's header says when the tested set passed."""
    readme = (ROOT / "README.md").read_text()
    for kind in ("latest", "floors"):
        start, end = lock.MARKERS[kind]
        block = readme.split(start, 1)[1].split(end, 1)[0]
        dated = re.search(r"\d{4}-\d\d-\d\d\b.*the suite (passed|FAILED)", block)
        assert dated or "not run yet" in block, f"README's {kind} block: {block!r}"
    assert "constraints.txt" in readme


@pytest.mark.parametrize("script", ["binder/postBuild", "binder/start"])
def test_binder_scripts_are_executable_bash(script):
    path = ROOT / script
    assert path.stat().st_mode & os.X_OK, f"{script} is not executable"
    assert path.read_text().startswith("#!/bin/bash\n")


def test_post_build_is_strict():
    assert "set -euo pipefail" in (ROOT / "binder/postBuild").read_text()


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
    makefile = (ROOT / "Makefile").read_text()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"`make ([a-z-]+)", page.read_text()):
            assert re.search(rf"^{target}:", makefile, re.M), f"{page.name}: no `make {target}`"
    assert re.search(r"^test: .*\n(\t.*\n)*?\t(\w+=\S+ )*\$\(BIN\)/pytest --nbmake", makefile, re.M)


def test_readme_and_docs_python_examples_run():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    blocks = [b for p in pages for b in re.findall(r"```python\n(.*?)```", p.read_text(), re.S)]
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, "docs", "exec"), {})
