"""Drive the lessons in a real JupyterLab through headless Chromium (Playwright).

`LabServer` starts `jupyter lab` on 127.0.0.1 in a temporary directory, with settings that start
the kernel on open and never autosave; `run_notebook` opens one notebook the way a learner does
(Run menu → Run All Cells), waits for every cell to finish and reports what went wrong on the page.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
# As root, and on a machine without a network, Chromium needs no sandbox and no background traffic.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOADING = "Loading widget..."
NEWS_PROMPT = "official Jupyter news"  # JupyterLab's first-start toast, unless fetchNews is set

# User settings for a lab that a test can drive: the kernel starts when a notebook opens, nothing is
# saved behind the test's back, and every cell stays in the DOM. Notifications are left as the
# environment sets them (jupyter/overrides.json, installed by `make`): a learner's lab shows no news
# prompt, and the test checks that.
SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker": {
        "autoStartDefaultKernel": True,
        "kernelShutdown": True,
        # the default windowing defers or skips off-screen cells; a checker must see them all
        "windowingMode": "none",
    },
}


def find_chromium() -> str | None:
    """Path of a Chromium executable Playwright can drive, or None."""
    for candidate in (os.environ.get("ACCUMLAB_CHROMIUM"), *CHROMIUM_CANDIDATES):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_settings(settings_dir: Path) -> None:
    for plugin, values in SETTINGS.items():
        path = settings_dir / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values, indent=2))


class LabServer:
    """`jupyter lab --no-browser` on 127.0.0.1, a free port and a random token, in `workdir`.

    Use as a context manager: the server, its kernels and its process group are always stopped.
    """

    def __init__(
        self,
        workdir: Path,
        notebooks: list[Path],
        *,
        repo: Path = REPO,
        start_timeout: float = 90.0,
    ):
        self.workdir = Path(workdir)
        self.repo = Path(repo)
        self.root = self.workdir / "lab"
        self.notebooks = notebooks
        self.start_timeout = start_timeout
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.log_path = self.workdir / "jupyter-lab.log"
        self.runtime_dir = self.workdir / "runtime"
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def lab_url(self, notebook: str) -> str:
        # ?reset starts from an empty workspace, so no earlier notebook is reopened next to this one
        return f"{self.url}/lab/tree/{notebook}?reset&token={self.token}"

    def __enter__(self) -> LabServer:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.root.mkdir(parents=True)
        for nb in self.notebooks:
            shutil.copy2(nb, self.root / nb.name)
        settings_dir = self.workdir / "settings"
        write_settings(settings_dir)
        env = dict(os.environ)
        env.update(
            # the kernel imports accumlab from this checkout
            PYTHONPATH=os.pathsep.join(p for p in (str(self.repo), env.get("PYTHONPATH", "")) if p),
            # private config, data and runtime dirs: no user-level settings or kernels leak in
            JUPYTER_CONFIG_DIR=str(self.workdir / "config"),
            JUPYTER_DATA_DIR=str(self.workdir / "data"),
            JUPYTER_RUNTIME_DIR=str(self.runtime_dir),
            JUPYTERLAB_SETTINGS_DIR=str(settings_dir),
            JUPYTERLAB_WORKSPACES_DIR=str(self.workdir / "workspaces"),
            # nor IPython startup files: the lessons must render as they do on a fresh machine
            IPYTHONDIR=str(self.workdir / "ipython"),
        )
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            f"--LabApp.user_settings_dir={settings_dir}",
            f"--LabApp.workspaces_dir={self.workdir / 'workspaces'}",
            # nothing here installs extensions or opens terminals; neither should touch the network
            "--LabApp.extension_manager=readonly",
            "--ServerApp.terminals_enabled=False",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI containers run as root
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        # own process group, so stop() reaches anything the server started in it
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.root,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            try:
                self.api("GET", "/api/status", timeout=2)
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.5)
        raise TimeoutError(
            f"jupyter lab did not answer within {self.start_timeout:.0f} s:\n{self.log_tail()}"
        )

    def api(self, method: str, path: str, *, timeout: float = 10):
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Stop every session's kernel, so lessons do not pile up kernels in memory."""
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}", timeout=30)

    def log_tail(self, chars: int = 4000) -> str:
        if self._log:
            self._log.flush()
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            # SIGTERM lets the server shut its kernels down; SIGKILL only if it does not exit in time
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        # kernels run in their own sessions; any left behind hold a connection file in our runtime dir
        for pid in _pids_mentioning(str(self.runtime_dir)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._log:
            self._log.close()
            self._log = None


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _pids_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


# ---------------------------------------------------------------------------------------------
# The page


@dataclass
class NotebookReport:
    """What a learner would have seen after Run All Cells."""

    name: str
    code_cells: int = 0
    widgets: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return f"{self.name}: " + (
            "ok" if not self.problems else "\n  - " + "\n  - ".join(self.problems)
        )


def notebook_cells(path: Path) -> list[dict]:
    """The code cells of a notebook file, in order: whether each has source, and its tags."""
    nb = json.loads(Path(path).read_text())
    return [
        {"source": "".join(c["source"]).strip(), "tags": c.get("metadata", {}).get("tags", [])}
        for c in nb["cells"]
        if c["cell_type"] == "code"
    ]


# Runs in the page: one record per code cell of the visible notebook, in file order.
_INSPECT_JS = r"""
() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return null;
  const status = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const text = el => (el.innerText || el.textContent || '');
  // IPython tracebacks name "Traceback (most recent call last)"; a SyntaxError ends "SyntaxError: ..."
  const isError = t => /Traceback \(most recent call last\)|^\s*\w*(Error|Exception): /m.test(t);
  const cells = [...panel.querySelectorAll('.jp-Notebook .jp-Cell.jp-CodeCell')].map(cell => {
    const prompt = cell.querySelector('.jp-InputArea-prompt');
    // innermost outputs only: an Output widget nests an output area inside the cell's own
    const outputs = [...cell.querySelectorAll('.jp-OutputArea-output')]
      .filter(o => !o.querySelector('.jp-OutputArea-output'));
    return {
      prompt: prompt ? text(prompt).replace(/\s/g, '') : '',
      errors: outputs
        .filter(o => o.matches('[data-mime-type="application/vnd.jupyter.stderr"]') && isError(text(o)))
        .map(o => text(o).trim().split('\n').filter(Boolean).slice(-2).join(' | ')),
      loading: outputs.filter(o => text(o).includes('Loading widget...')).length,
      broken: cell.querySelectorAll('.jupyter-widgets-error-widget').length
        + outputs.filter(o => text(o).includes('Error displaying widget')).length,
      // a matplotlib Figure with no image formatter registered shows only its repr
      textFigures: outputs.filter(o => /^<Figure size [\d.]+x[\d.]+ with \d+ Axes>$/m.test(text(o))).length,
      widgets: cell.querySelectorAll('.jupyter-widgets').length,
    };
  });
  return {status: status ? status.getAttribute('data-status') : null, cells};
}
"""


def inspect(page) -> dict | None:
    """The visible notebook's kernel status and one record per code cell (see `_INSPECT_JS`)."""
    return page.evaluate(_INSPECT_JS)


def open_notebook(page, server: LabServer, name: str, *, timeout: float = 60.0) -> None:
    """Open `name` in a fresh lab page and wait until its kernel is started, connected and idle."""
    page.goto(server.lab_url(name), timeout=timeout * 1000)
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(timeout=timeout * 1000)
    # close the file browser, as a learner reading a lesson does: the notebook gets the width
    page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").first.click()
    wait_kernel_ready(page, server, name, timeout=timeout)


def page_status(page) -> str | None:
    """The notebook toolbar's kernel status: idle, busy, initializing, unknown, ... (None: no notebook)."""
    state = inspect(page)
    return state and state["status"]


def wait_kernel_ready(
    page, server: LabServer, name: str, *, timeout: float, steady: float = 1.5
) -> None:
    # The toolbar reads "idle" before any kernel exists, and the page may reconnect its websocket
    # once after start; a Run All sent then is lost. Ready = the server has this notebook's kernel
    # idle with a client connected, the page agrees, and that holds for `steady` seconds.
    deadline = time.monotonic() + timeout
    since = None
    while time.monotonic() < deadline:
        kernel = next(
            (s["kernel"] for s in server.api("GET", "/api/sessions") if s["path"] == name), None
        )
        ready = (
            kernel is not None
            and kernel.get("execution_state") == "idle"
            and kernel.get("connections", 0) >= 1
            and page_status(page) == "idle"
        )
        if not ready:
            since = None
        elif since is None:
            since = time.monotonic()
        elif time.monotonic() - since >= steady:
            return
        time.sleep(0.2)
    raise TimeoutError(
        f"{name}: kernel not ready after {timeout:.0f} s (page shows {page_status(page)!r})"
    )


def run_all_cells(page) -> None:
    """Run → Run All Cells, from the menu bar, as a learner does."""
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def started(page, *, timeout: float) -> bool:
    """Whether any code cell is queued, running or done within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = inspect(page)
        if state and any(c["prompt"] not in ("", "[]:") for c in state["cells"]):
            return True
        time.sleep(0.2)
    return False


def _ran(cell: dict) -> bool:
    return cell["prompt"].strip("[]:").isdigit()


def _finished(state: dict | None, cells: list[dict]) -> bool:
    """No cell queued or running, the kernel idle, and Run All reached its end or an error."""
    if not state or state["status"] != "idle" or len(state["cells"]) != len(cells):
        return False
    if any(c["prompt"] == "[*]:" for c in state["cells"]):
        return False
    for got, want in zip(state["cells"], cells, strict=True):
        if got["errors"] and "raises-exception" not in want["tags"]:
            return True  # an unexpected error stops Run All: the cells below stay unrun
        if want["source"] and not _ran(got):
            return False
    return True


def wait_finished(
    page, cells: list[dict], *, timeout: float, name: str, widget_grace: float = 15.0
) -> dict:
    """Wait for Run All to finish, then up to `widget_grace` s for widgets still loading; the state."""
    deadline = time.monotonic() + timeout
    state = inspect(page)
    while not _finished(state, cells):
        if state and state["status"] == "dead":
            raise RuntimeError(f"{name}: the kernel died while running the notebook")
        if time.monotonic() > deadline:
            state = state or {"status": None, "cells": []}
            running = [i + 1 for i, c in enumerate(state["cells"]) if c["prompt"] == "[*]:"]
            raise TimeoutError(
                f"{name}: not finished after {timeout:.0f} s (kernel {state['status']!r}, "
                f"code cells {running} still show [*])"
            )
        time.sleep(0.5)
        state = inspect(page)
    grace = time.monotonic() + widget_grace
    while any(c["loading"] for c in state["cells"]) and time.monotonic() < grace:
        time.sleep(0.5)
        state = inspect(page)
    return state


def problems_of(state: dict, cells: list[dict]) -> list[str]:
    """Plain-language list of what is wrong on the page (empty when the notebook is healthy)."""
    found, unrun, stopped = [], [], False
    for i, (got, want) in enumerate(zip(state["cells"], cells, strict=True)):
        where = f"code cell {i + 1}"
        expected_error = "raises-exception" in want["tags"]
        if want["source"] and not _ran(got):
            unrun.append(i + 1)
        if got["errors"] and not expected_error:
            found += [f"{where}: error output: {e}" for e in got["errors"]]
            stopped = True
        if expected_error and _ran(got) and not got["errors"]:
            found.append(f"{where} is tagged raises-exception but showed no error")
        if got["loading"]:
            found.append(f"{where}: {got['loading']} widget(s) still show '{LOADING}'")
        if got["broken"]:
            found.append(
                f"{where}: {got['broken']} widget(s) failed to render (error widget shown)"
            )
        if got["textFigures"]:
            found.append(
                f"{where}: {got['textFigures']} figure(s) shown as text '<Figure size ...>', "
                "not as an image (no matplotlib image formatter in the kernel)"
            )
    if unrun:
        why = ": Run All stops at the first unexpected error" if stopped else ""
        cells = ", ".join(map(str, unrun))
        found.append(f"code cell{'s' if len(unrun) > 1 else ''} {cells} did not run{why}")
    return found


def page_problems(page, path: Path) -> list[str]:
    """`problems_of` the notebook `path` as the page shows it now (e.g. after moving a slider)."""
    return problems_of(inspect(page), notebook_cells(path))


def run_notebook(page, server: LabServer, path: Path, *, timeout: float = 120.0) -> NotebookReport:
    """Open `path` (already copied into the lab), Run All Cells, and report what the page shows."""
    cells = notebook_cells(path)
    open_notebook(page, server, path.name, timeout=min(timeout, 60))
    run_all_cells(page)
    if not started(page, timeout=15):
        run_all_cells(page)  # a learner clicks again when nothing happens; so does the test, once
        if not started(page, timeout=15):
            raise TimeoutError(f"{path.name}: Run All Cells started no cell within 30 s")
    state = wait_finished(page, cells, timeout=timeout, name=path.name)
    return NotebookReport(
        path.name,
        code_cells=len(cells),
        widgets=sum(c["widgets"] for c in state["cells"]),
        problems=problems_of(state, cells),
    )


def screenshot(page, target: Path) -> Path:
    """Save the visible lab to `target`, scrolled to the first widget (else the first figure)."""
    page.evaluate(
        """() => {
          const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
          const hit = panel && (panel.querySelector('.jp-Cell .widget-slider')
                                || panel.querySelector('.jp-Cell .jp-OutputArea-output img'));
          const cell = hit && hit.closest('.jp-Cell');
          if (cell) cell.scrollIntoView({block: 'start'});
        }"""
    )
    time.sleep(0.3)  # let the scroll paint
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target))
    return target


# ---------------------------------------------------------------------------------------------
# Widgets driven by the keyboard


_EXPLORER_JS = r"""
async (label) => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const slider = panel && [...panel.querySelectorAll('.widget-slider')].find(
    s => (s.querySelector('.widget-label')?.textContent || '').trim() === label);
  if (!slider) return null;
  // an Explorer is VBox([HBox(controls), ..., Image, Output]): its figure is the Image widget
  // next to the slider, the Output shows an error if a change raised one
  const box = slider.closest('.widget-vbox');
  const img = box && box.querySelector('img.widget-image');
  const out = box && box.querySelector('.widget-output');
  // the image's bytes, hashed (FNV-1a): its blob: URL is new on every update, even for the
  // same picture, so only the content tells whether the figure changed
  let image = '';
  if (img && img.src) {
    try {
      const bytes = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
      let h = 0x811c9dc5;
      for (const b of bytes) h = Math.imul(h ^ b, 0x01000193) >>> 0;
      image = bytes.length ? `${bytes.length}:${h.toString(16)}` : '';
    } catch (e) {
      image = '';  // revoked by a newer update while it was read: ask again
    }
  }
  return {
    value: (slider.querySelector('.widget-readout')?.textContent || '').trim(),
    // noUiSlider reports the handle position in percent of the range
    atMax: parseFloat(slider.querySelector('.noUi-handle')?.getAttribute('aria-valuenow')) >= 100,
    image,
    // decoded and laid out by the browser: a figure a learner sees, not just bytes received
    shown: !!(img && img.complete && img.naturalWidth > 0 && img.getBoundingClientRect().width > 0),
    output: out ? (out.innerText || '').trim().slice(0, 300) : '',
  };
}
"""


def explorer_state(page, label: str) -> dict | None:
    """The slider labelled `label`: its readout, and the content (hashed), visibility and error
    text of its explorer's figure."""
    return page.evaluate(_EXPLORER_JS, label)


def press_on_slider(page, label: str, key: str, *, timeout: float = 30.0) -> tuple[dict, dict]:
    """Focus the handle of the slider labelled `label`, press `key` (e.g. "ArrowRight") and wait until
    the explorer's figure is redrawn. Returns its state before and after."""
    before = explorer_state(page, label)
    if before is None:
        raise LookupError(f"no slider labelled {label!r} on the page")
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    handle = (
        panel.locator(".widget-slider")
        .filter(has=page.locator(".widget-label", has_text=re.compile(f"^{re.escape(label)}$")))
        .first.locator(".noUi-handle")
    )
    handle.scroll_into_view_if_needed()
    handle.focus()
    page.keyboard.press(key)
    deadline = time.monotonic() + timeout
    after = explorer_state(page, label)
    while time.monotonic() < deadline:
        if after["image"] and after["image"] != before["image"] and after["shown"]:
            return before, after
        time.sleep(0.25)
        after = explorer_state(page, label)
    raise TimeoutError(
        f"{key} on slider {label!r} (readout {before['value']} -> {after['value']}) did not redraw "
        f"its figure within {timeout:.0f} s; the explorer shows: {after['output'] or '(nothing)'}"
    )
