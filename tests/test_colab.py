"""Every lesson opens in Colab: a badge in its title cell, and a first code cell that installs
accumlab where it is missing (and only there), from the revision the badge opened."""

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import colab  # noqa: E402

LESSONS = colab.lessons()


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_has_the_badge_and_the_install_cell_first(path):
    cells = json.loads(path.read_text())["cells"]
    assert colab.badge(path) in "".join(cells[0]["source"])
    first_code = next(c for c in cells if c["cell_type"] == "code")
    assert "".join(first_code["source"]) == colab.INSTALL_CELL


def test_badge_and_install_cell_name_the_same_revision():
    assert f"/blob/{colab.REF}/notebooks/" in colab.colab_url(LESSONS[0])
    assert f"github.com/{colab.REPO}@{colab.REF}" in colab.INSTALL_CELL
    readme = (ROOT / "README.md").read_text()
    for path in LESSONS:
        assert colab.colab_url(path) in readme, f"README map lacks the Colab badge of {path.name}"


def test_check_mode_reports_a_stale_lesson(tmp_path, monkeypatch):
    lesson = tmp_path / "notebooks" / "00_x.ipynb"
    lesson.parent.mkdir()
    lesson.write_text(LESSONS[0].read_text().replace("accumlab@", "accumlab@old-"))
    (tmp_path / "README.md").write_text((ROOT / "README.md").read_text())
    monkeypatch.setattr(colab, "ROOT", tmp_path)
    assert colab.main(["--check"]) == 1
    assert colab.main([]) == 0 and colab.main(["--check"]) == 0


@pytest.mark.slow
def test_install_cell_installs_accumlab_where_it_is_missing_and_only_there(tmp_path):
    """A fresh environment that sees this one's packages but not accumlab runs the cell with the
    local checkout in place of the GitHub URL: accumlab gets installed. Run again with an address
    that cannot be installed from, the cell succeeds: it never called pip."""
    env_dir = tmp_path / "env"
    # no pip or setuptools of its own (3.11 would bundle a setuptools too old for pyproject.toml):
    # both come from this environment, like everything but accumlab
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # torch and the other dependencies come from this environment (a plain line in a .pth file
    # adds the folder, but not the .pth files in it: the editable accumlab stays invisible)
    Path(site, "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_NO_BUILD_ISOLATION"] = "false"  # build with the setuptools found, no download
    probe = [py, "-c", "import importlib.util; print(importlib.util.find_spec('accumlab'))"]

    def run_cell(source: str) -> subprocess.CompletedProcess:
        code = colab.INSTALL_CELL.replace(colab.INSTALL_URL, source)
        return subprocess.run(
            [py, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )

    assert subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True).stdout == (
        "None\n"
    )
    first = run_cell(ROOT.as_uri())
    assert first.returncode == 0, first.stderr[-2000:]
    spec = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True).stdout
    assert site in spec  # installed into the fresh environment, not found in the checkout
    again = run_cell("file:///nonexistent/accumlab")
    assert again.returncode == 0, again.stderr[-2000:]
