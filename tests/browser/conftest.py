"""One JupyterLab server and one headless Chromium for all browser tests; a fresh page per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .lab import CHROMIUM_ARGS, FIXTURES, REPO, LabServer, find_chromium

# The fixture notebooks are opened in the lab by these tests; nbmake must not run them on its own
# (one is broken on purpose).
collect_ignore_glob = ["fixtures/*"]

LESSONS = sorted(REPO.glob("notebooks/[0-9][0-9]_*.ipynb"))


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str):
    # CI must install Chromium (.ci/run does, with apt); anywhere else a missing browser skips
    if in_ci():
        pytest.fail(f"CI is set but {reason}; .ci/run installs Debian's chromium", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        unavailable(
            "no Chromium found (apt-get install chromium, or set ACCUMLAB_CHROMIUM to its path)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("Playwright for Python is not installed (pip install playwright)")
    return path


@pytest.fixture(scope="session")
def lab(chromium, tmp_path_factory):
    """A running `jupyter lab` holding copies of every lesson and of the fixture notebooks."""
    notebooks = LESSONS + sorted(FIXTURES.glob("*.ipynb"))
    with LabServer(tmp_path_factory.mktemp("lab"), notebooks) as server:
        yield server


@pytest.fixture(scope="session")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser, lab):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    try:
        yield page
    finally:
        page.close()
        lab.shutdown_kernels()  # one lesson's kernel at a time: nine torch kernels would not fit


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    """Where lesson screenshots go: ACCUMLAB_SCREENSHOTS (relative to the repo), else a tmp dir."""
    target = os.environ.get("ACCUMLAB_SCREENSHOTS")
    if target:
        path = Path(target)
        return path if path.is_absolute() else REPO / path
    return tmp_path_factory.mktemp("screenshots")
