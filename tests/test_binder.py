"""Where learners run the lessons: the JupyterLab settings shipped with the project, and Binder's
configuration checked as far as this machine allows (no Docker, no conda-forge): repo2docker's build
plan, and binder/postBuild and binder/start run in a clean virtual environment."""

import json
import os
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import lab_settings  # noqa: E402


def test_lab_settings_answer_the_news_prompt_and_skip_the_update_check():
    settings = json.loads((ROOT / "jupyter/overrides.json").read_text())
    notification = settings["@jupyterlab/apputils-extension:notification"]
    assert notification == {"fetchNews": "false", "checkForUpdates": False}


def test_lab_settings_tool_merges_into_existing_overrides(tmp_path):
    path = lab_settings.overrides_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"other:plugin": {"a": 1}}))
    lab_settings.install(tmp_path)
    merged = json.loads(path.read_text())
    assert merged["other:plugin"] == {"a": 1}
    assert merged["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert path == tmp_path / "share/jupyter/lab/settings/overrides.json"


def test_make_and_binder_install_the_lab_settings():
    makefile = (ROOT / "Makefile").read_text()
    assert "tools/lab_settings.py" in makefile
    assert "jupyter/overrides.json" in makefile  # a changed settings file reinstalls
    assert "python tools/lab_settings.py" in (ROOT / "binder/postBuild").read_text()


@pytest.mark.slow
def test_repo2docker_plan_uses_the_binder_folder():
    """`repo2docker --no-build` writes the image's Dockerfile without Docker: it must take its
    environment from binder/environment.yml, run binder/postBuild and start through binder/start."""
    exe = shutil.which("repo2docker", path=str(Path(sys.executable).parent)) or shutil.which(
        "repo2docker"
    )
    if exe is None:
        pytest.skip("jupyter-repo2docker is not installed (it is in the dev extra)")
    plan = subprocess.run(
        [exe, "--no-build", "--no-run", "--debug", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    text = plan.stdout + plan.stderr
    assert "Building conda environment for python=3.12" in text
    assert '--file "binder/environment.yml"' in text
    assert "RUN ./binder/postBuild" in text
    assert 'ENV R2D_ENTRYPOINT="${REPO_DIR}/binder/start"' in text
    assert "requirements.txt" not in text and "setup.py" not in text  # nothing else is picked up


@pytest.mark.slow
def test_binder_scripts_run_in_a_clean_virtual_environment(tmp_path):
    """postBuild installs accumlab and the lab settings into the environment it runs in; start
    caps the thread pools and runs its arguments. The dependencies themselves come from conda on
    Binder (postBuild installs with --no-deps), so the clean environment needs none."""
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    py = bin_dir / "python"
    # postBuild builds with --no-build-isolation, so the environment's own setuptools must meet
    # pyproject's build requirement (Python 3.12 venvs have none, 3.11's bundled one is too old;
    # Binder's conda environment has a current one)
    requirement = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    subprocess.run([py, "-m", "pip", "install", "-q", *requirement], check=True, timeout=300)
    work = tmp_path / "repo"
    shutil.copytree(
        ROOT, work, ignore=shutil.ignore_patterns(".venv", ".git", "*.egg-info", "__pycache__")
    )
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "PYTHONPATH": "",
    }
    subprocess.run(["bash", "binder/postBuild"], cwd=work, env=env, check=True, timeout=300)
    found = subprocess.run(
        [py, "-c", "import accumlab; print(accumlab.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert found.strip() == str(work / "accumlab" / "__init__.py")
    overrides = json.loads(lab_settings.overrides_path(env_dir).read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    threads = subprocess.run(
        ["bash", "binder/start", "python", "-c", "import os; print(os.environ['OMP_NUM_THREADS'])"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert threads.strip() == "1"
