"""Every lesson run in a real JupyterLab in headless Chromium, as a learner runs it.

nbmake executes cells but never renders a widget; these tests open each lesson in the lab, run all
cells from the Run menu, and look at what the page shows: error outputs, widgets that never load or
fail to render, figures shown as text. In lesson 02 the explorer's slider is moved with the keyboard.

    pytest -m browser tests/browser                                 # screenshots in a tmp dir
    ACCUMLAB_SCREENSHOTS=docs/img pytest -m browser tests/browser   # refresh the README's pictures
"""

from __future__ import annotations

import os

import pytest

from .conftest import LESSONS
from .lab import (
    FIXTURES,
    NEWS_PROMPT,
    explorer_state,
    page_problems,
    press_on_slider,
    run_notebook,
    screenshot,
)

pytestmark = pytest.mark.browser

TIMEOUT = float(os.environ.get("ACCUMLAB_LAB_TIMEOUT", "120"))  # seconds per notebook
EXPLORER_SLIDER = "micro-batch size"  # al.accumulation.accumulation_explorer, lesson 02


def check_keyboard_explorer(page) -> None:
    """One arrow key on the micro-batch slider moves it one step and redraws a different gradient;
    the opposite key moves it back and redraws again (press_on_slider fails when no redraw comes)."""
    state = explorer_state(page, EXPLORER_SLIDER)
    assert state is not None, f"no slider labelled {EXPLORER_SLIDER!r}: is the explorer shown?"
    assert state["image"] and state["shown"], f"the explorer shows no figure: {state}"
    there, back_key, step = (
        ("ArrowLeft", "ArrowRight", -1) if state["atMax"] else ("ArrowRight", "ArrowLeft", 1)
    )
    before, after = press_on_slider(page, EXPLORER_SLIDER, there)
    assert int(after["value"]) == int(before["value"]) + step, (
        f"{there}: readout {before['value']} -> {after['value']}"
    )
    assert after["image"] != before["image"], "the plotted gradient did not change"
    _, back = press_on_slider(page, EXPLORER_SLIDER, back_key)
    assert back["value"] == before["value"], (
        f"{back_key}: readout {after['value']} -> {back['value']}"
    )
    assert back["image"] != after["image"], "the plotted gradient did not change back"


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_in_lab(page, lab, screenshots, lesson):
    shot = screenshots / f"{lesson.stem}.png"
    try:
        report = run_notebook(page, lab, lesson, timeout=TIMEOUT)
    except BaseException:
        screenshot(page, shot)  # what the page showed when it went wrong
        raise
    screenshot(page, shot)  # the lesson as Run All leaves it, before the keyboard moves anything
    assert not report.problems, report.summary()
    if lesson.name.startswith("02_"):
        check_keyboard_explorer(page)
        assert not page_problems(page, lesson), page_problems(page, lesson)


def test_keyboard_moves_explorer_fixture(page, lab):
    """The keyboard check on the explorer alone, so it runs before lesson 02 exists."""
    if any(p.name.startswith("02_") for p in LESSONS):
        pytest.skip("lesson 02 exercises the explorer with the keyboard")
    fixture = FIXTURES / "explorer.ipynb"
    report = run_notebook(page, lab, fixture, timeout=TIMEOUT)
    assert not report.problems, report.summary()
    check_keyboard_explorer(page)
    assert not page_problems(page, fixture), page_problems(page, fixture)


def test_checker_reports_broken_widget_and_text_figure(page, lab):
    """The kernel runs this fixture without an error; only the page shows what is broken."""
    report = run_notebook(page, lab, FIXTURES / "broken_widget.ipynb", timeout=TIMEOUT)
    assert report.problems == [
        "code cell 2: 1 widget(s) failed to render (error widget shown)",
        "code cell 3: 1 figure(s) shown as text '<Figure size ...>', not as an image "
        "(no matplotlib image formatter in the kernel)",
    ], report.summary()
    assert report.widgets >= 2  # the working slider rendered, the broken one shows an error


def test_checker_reports_unexpected_error_only(page, lab):
    """A `raises-exception` cell's error is expected; the untagged one stops Run All and is reported."""
    report = run_notebook(page, lab, FIXTURES / "errors.ipynb", timeout=TIMEOUT)
    assert len(report.problems) == 2, report.summary()
    assert report.problems[0].startswith("code cell 3: error output:")
    assert "ZeroDivisionError" in report.problems[0]
    assert (
        report.problems[1] == "code cell 4 did not run: Run All stops at the first unexpected error"
    )


def test_lab_starts_without_the_news_prompt(page, lab):
    """JupyterLab asks every new user about "official Jupyter news" in a toast over the notebook
    a few seconds after start, unless the environment's settings answer it (jupyter/overrides.json,
    installed into the environment by `make` and by Binder's postBuild)."""
    fixture = FIXTURES / "explorer.ipynb"
    page.goto(lab.lab_url(fixture.name))
    page.wait_for_selector(".jp-Notebook", timeout=TIMEOUT * 1000)
    try:  # the prompt comes after the lab has loaded; waiting for it is the check
        page.wait_for_selector(f".Toastify__toast:has-text('{NEWS_PROMPT}')", timeout=15_000)
    except Exception:  # playwright's TimeoutError: no prompt within 15 s, as it should be
        return
    pytest.fail(
        "JupyterLab showed its news prompt: run `python tools/lab_settings.py` in this environment "
        "(make does) so jupyter/overrides.json is installed"
    )
