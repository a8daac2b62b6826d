"""The lessons' site: built by Sphinx + myst-nb from the notebooks where they are (book/conf.py),
published by the GitHub Pages workflow, linked from the README. The build itself and its pages
are checked by `make book` and tests/browser/test_book.py."""

import runpy
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import colab  # noqa: E402

CONF = runpy.run_path(str(ROOT / "book" / "conf.py"))
SITE = "https://accumlab.github.io/accumlab/"


def test_every_lesson_is_a_page_built_from_the_notebook_itself():
    from fnmatch import fnmatch

    patterns = CONF["include_patterns"]
    for lesson in colab.lessons():
        assert any(fnmatch(f"notebooks/{lesson.name}", p) for p in patterns), lesson.name
    assert not list((ROOT / "book").rglob("*.ipynb")), "the site reads notebooks/, no copies"
    assert CONF["nb_execution_mode"] == "force" and CONF["nb_execution_raise_on_error"]
    assert (ROOT / "book" / "index.md").read_text().count("/notebooks/[0-9][0-9]_*") == 1


def test_launch_buttons_open_the_same_revision_as_the_colab_badges():
    options = CONF["html_theme_options"]
    assert options["repository_url"] == f"https://github.com/{colab.REPO}"
    assert options["repository_branch"] == colab.REF
    assert options["path_to_docs"] == ""  # pages sit at notebooks/NAME, as in the repository
    assert set(options["launch_buttons"]) >= {"binderhub_url", "colab_url"}


def test_widgets_fall_back_to_their_picture():
    assert CONF["nb_ipywidgets_js"] == {}  # no widget manager from a CDN
    assert ("html", "application/vnd.jupyter.widget-view+json", None) in CONF[
        "nb_mime_priority_overrides"
    ]


def test_pages_workflow_builds_with_make_and_publishes_the_build():
    flow = yaml.safe_load((ROOT / ".github/workflows/pages.yml").read_text())
    steps = flow["jobs"]["build"]["steps"]
    runs = " ".join(s.get("run", "") for s in steps)
    assert "make book" in runs
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/book"
    assert flow["jobs"]["deploy"]["steps"][0]["uses"].startswith("actions/deploy-pages")
    assert flow["permissions"]["pages"] == "write"


def test_ci_builds_the_site_and_checks_it_in_a_browser():
    ci = (ROOT / ".ci/run").read_text()
    assert ci.index("make book") < ci.index("make test-book")


def test_readme_links_to_the_site():
    assert SITE in (ROOT / "README.md").read_text()
