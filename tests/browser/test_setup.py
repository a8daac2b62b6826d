"""The browser tests' own plumbing, checked without a browser."""

from __future__ import annotations

import pytest

from .conftest import unavailable
from .lab import notebook_cells, problems_of


def test_missing_browser_skips_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no Chromium"):
        unavailable("no Chromium found")


def test_missing_browser_fails_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set but no Chromium"):
        unavailable("no Chromium found")


def test_problems_of_a_healthy_page_is_empty():
    cells = [{"source": "1", "tags": []}, {"source": "", "tags": []}]
    seen = [
        {"prompt": "[1]:", "errors": [], "loading": 0, "broken": 0, "textFigures": 0, "widgets": 0},
        {"prompt": "[]:", "errors": [], "loading": 0, "broken": 0, "textFigures": 0, "widgets": 0},
    ]
    assert problems_of({"status": "idle", "cells": seen}, cells) == []
    seen[0]["loading"] = 1
    assert problems_of({"status": "idle", "cells": seen}, cells) == [
        "code cell 1: 1 widget(s) still show 'Loading widget...'"
    ]


def test_notebook_cells_reads_tags():
    from .lab import FIXTURES

    cells = notebook_cells(FIXTURES / "errors.ipynb")
    assert [c["tags"] for c in cells] == [["raises-exception"], [], [], []]
