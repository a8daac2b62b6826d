"""The lessons as a static site: `make book` (sphinx-build -c book . _build/book).

Sphinx reads the lessons where they are (notebooks/NN_*.ipynb, never a copy) and myst-nb executes
every one of them during the build, so each page shows the figures, tables and printed results of
a run on the tested set of versions; a cell that raises (other than one tagged
`raises-exception`) fails the build. An explorer's output carries, beside the live widget, a PNG
of its default state (accumlab/explorer.py): with no kernel behind the page, that PNG is shown.
"""

import os

project = "accumlab"
author = "accumlab contributors"
copyright = "accumlab contributors, MIT License"
REPOSITORY = "accumlab/accumlab"  # the GitHub repository the launch buttons open (tools/colab.py)
BRANCH = "main"

extensions = ["myst_nb"]
root_doc = "book/index"
# the source folder is the repository root: only these files are pages
include_patterns = ["book/index.md", "notebooks/[0-9][0-9]_*.ipynb", "docs/*.md"]
exclude_patterns = [".venv*", "_build", ".git", "**/.ipynb_checkpoints"]

# execute every lesson on every build (no cache: the site shows what this checkout computes)
nb_execution_mode = os.environ.get("ACCUMLAB_BOOK_EXECUTE", "force")
nb_execution_timeout = 600  # seconds per cell; each lesson runs in about 10 s on 2 cores
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
# no widget JavaScript from a CDN: the page shows the explorer's PNG, not an empty widget area
nb_ipywidgets_js = {}
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
suppress_warnings = ["mystnb.unknown_mime_type"]

html_theme = "sphinx_book_theme"
html_title = "accumlab: how gradient accumulation really works"
html_extra_path = ["_extra"]  # index.html at the site's root: to the landing page
html_theme_options = {
    "repository_url": f"https://github.com/{REPOSITORY}",
    "repository_branch": BRANCH,
    "path_to_docs": "",
    "use_repository_button": True,
    "launch_buttons": {
        "binderhub_url": "https://mybinder.org",
        "colab_url": "https://colab.research.google.com",
        "notebook_interface": "jupyterlab",
    },
}


def drop_widget_state(app, pagename, templatename, context, doctree):
    """The executed lessons carry the state of every widget they made (about 100 kB a page), for
    a widget manager this site does not load: the pages show each explorer's PNG instead."""
    scripts = context.get("script_files", [])
    context["script_files"] = [
        s
        for s in scripts
        if getattr(s, "attributes", {}).get("type") != "application/vnd.jupyter.widget-state+json"
    ]


def setup(app):
    app.connect("html-page-context", drop_widget_state, priority=900)  # after myst-nb adds it
