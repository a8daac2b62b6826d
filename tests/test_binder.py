"""Where learners run the lessons: the JupyterLab settings shipped with the project, and Binder's
configuration checked as far as this machine allows (no Docker engine): repo2docker's build plan,
pip resolving binder/requirements.txt to the tested set, and binder/postBuild and binder/start run
in a clean virtual environment."""

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
    """`repo2docker --no-build` writes the image's Dockerfile without Docker: Python from
    binder/runtime.txt, Graphviz from apt.txt, then pip with binder/requirements.txt in the
    repository's root once the whole repository is in the image (the -c and -e paths need it),
    postBuild, and binder/start as the entry point."""
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
    python = (ROOT / "binder/runtime.txt").read_text().strip().removeprefix("python-")
    assert f"Building conda environment for python={python}" in text  # repo2docker's base env
    assert "apt-get install --yes --no-install-recommends graphviz" in text
    whole_repo = text.index("COPY --chown=0:0 src/ ${REPO_DIR}/")
    pip = text.index(
        'RUN ${KERNEL_PYTHON_PREFIX}/bin/pip install --no-cache-dir -r "binder/requirements.txt"'
    )
    assert whole_repo < pip
    assert text.rindex("WORKDIR ${REPO_DIR}", 0, pip) > 0
    assert pip < text.index("RUN ./binder/postBuild")
    assert 'ENV R2D_ENTRYPOINT="${REPO_DIR}/binder/start"' in text
    assert "environment.yml" not in text.split("build_script_files")[-1]  # no conda solve of ours
    assert "setup.py" not in text and "pip install --no-cache-dir ." not in text


@pytest.mark.slow
def test_binder_requirements_resolve_to_the_tested_set(tmp_path):
    """pip, run as repo2docker runs it (from the repository's root, on binder/requirements.txt),
    resolves every package to its version in constraints.txt: nothing unpinned, nothing else.
    A dry run against the package index (PyPI here; the CPU index of torch is not reachable from
    this machine, so torch comes from PyPI's files or this machine's wheel of the same release)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import lock

    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--retries", "0", "--report", str(report), "-r", "binder/requirements.txt"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    chosen = {
        lock.canonical(i["metadata"]["name"]): i["metadata"]["version"].split("+", 1)[0]
        for i in json.loads(report.read_text())["install"]
    }
    assert (
        chosen.pop("accumlab")
        == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    )
    pins = lock.parse_pins((ROOT / "constraints.txt").read_text())
    assert {n for n in chosen if n not in pins} == set(), "installed, but not in the tested set"
    assert {n: v for n, v in chosen.items() if pins[n] != v} == {}
    assert {"torch", "jupyterlab", "ipywidgets", "deepspeed"} <= set(chosen)


def test_post_build_installs_the_lab_settings_where_it_runs(tmp_path):
    """postBuild installs the lab settings into the environment whose python it finds first."""
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    env = {**os.environ, "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", "binder/postBuild"], cwd=ROOT, env=env, check=True, timeout=60)
    overrides = json.loads(lab_settings.overrides_path(env_dir).read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    threads = subprocess.run(
        ["bash", "binder/start", "python", "-c", "import os; print(os.environ['OMP_NUM_THREADS'])"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert threads.strip() == "1"
