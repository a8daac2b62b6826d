"""The built site of the lessons (`make book`) in headless Chromium, page by page.

    make book && make test-book      # or: ACCUMLAB_BOOK=_build/book pytest -m browser tests/browser/test_book.py

Each lesson has its page; on it every cell of the notebook is shown with its outputs, every image
in an output has loaded (a figure, and each explorer's PNG of its default state), no output is an
error (but in a cell tagged `raises-exception`) or a figure printed as text, nothing waits for a widget manager, and the launch buttons open
this lesson in Colab and on Binder. The site is served from 127.0.0.1, as GitHub Pages serves it.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import threading
from pathlib import Path

import pytest

from .conftest import LESSONS, unavailable

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
BOOK = Path(os.environ.get("ACCUMLAB_BOOK", REPO / "_build" / "book"))
if not BOOK.is_absolute():
    BOOK = REPO / BOOK
REPOSITORY, BRANCH = "accumlab/accumlab", "main"  # book/conf.py, tools/colab.py

# what each page shows, read in the page itself
PAGE_STATE = """() => {
  const cells = [...document.querySelectorAll('div.cell')];
  const text = el => el.innerText || '';
  return {
    title: document.title,
    cells: cells.map(c => {
      const out = c.querySelector('div.cell_output');
      const imgs = out ? [...out.querySelectorAll('img')] : [];
      return {
        source: text(c.querySelector('div.cell_input') || c),
        expectsError: c.classList.contains('tag_raises-exception'),
        hasOutput: !!out,
        images: imgs.length,
        loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
        errors: out ? [...out.querySelectorAll('.output.traceback, .output.error')].map(text) : [],
        text: out ? text(out) : '',
      };
    }),
    links: [...document.querySelectorAll('a')].map(a => a.href),
  };
}"""


def code_cells(path: Path) -> list[str]:
    return [
        "".join(c["source"])
        for c in json.loads(path.read_text())["cells"]
        if c["cell_type"] == "code"
    ]


@pytest.fixture(scope="module")
def site():
    if not (BOOK / "book" / "index.html").exists():
        unavailable(f"no built site in {BOOK} (make book)")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(BOOK))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    try:
        yield page
    finally:
        page.close()


def test_root_leads_to_the_lessons(page, site):
    page.goto(f"{site}/index.html")
    page.wait_for_url(re.compile(r"/book/index\.html$"), timeout=10_000)
    hrefs = page.eval_on_selector_all("a", "els => els.map(a => a.getAttribute('href'))")
    for lesson in LESSONS:
        assert any(h and h.endswith(f"notebooks/{lesson.stem}.html") for h in hrefs), lesson.stem


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_page(page, site, lesson):
    page.goto(f"{site}/notebooks/{lesson.stem}.html", wait_until="load")
    page.wait_for_load_state("networkidle", timeout=30_000)
    state = page.evaluate(PAGE_STATE)
    sources = code_cells(lesson)
    assert len(state["cells"]) == len(sources), "a code cell is missing from the page"
    problems = []
    for i, (cell, source) in enumerate(zip(state["cells"], sources)):
        where = f"code cell {i + 1}"
        if cell["errors"] and not cell["expectsError"]:
            problems.append(f"{where}: error output {cell['errors'][0][:300]!r}")
        if cell["loaded"] < cell["images"]:
            problems.append(f"{where}: {cell['images'] - cell['loaded']} image(s) did not load")
        if "<Figure size" in cell["text"]:
            problems.append(f"{where}: a figure shown as text")
        if "Loading widget" in cell["text"] or "widget-view+json" in cell["text"]:
            problems.append(f"{where}: a widget without its static picture")
        last = source.strip().splitlines()[-1] if source.strip() else ""
        if re.search(r"_explorer\(", source) and re.fullmatch(r"\w*explorer", last):
            # the explorer is the cell's last expression: when it shows anything, its picture
            if cell["hasOutput"] and cell["loaded"] < 1:
                problems.append(f"{where}: the explorer left no picture of its default state")
    assert not problems, "\n".join(problems)
    figures = sum(c["loaded"] for c in state["cells"])
    assert figures >= 1, "no figure on the page"
    colab = f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}/notebooks/{lesson.name}"
    binder = (
        f"https://mybinder.org/v2/gh/{REPOSITORY}/{BRANCH}?urlpath=lab/tree/notebooks/{lesson.name}"
    )
    assert colab in state["links"], "no Open in Colab link"
    assert binder in state["links"], "no Binder link"


def test_measurements_and_versions_pages(page, site):
    for name, must in (("measurements", "wall time (s)"), ("versions", "constraints.txt")):
        page.goto(f"{site}/docs/{name}.html")
        assert must in page.inner_text("main"), name
