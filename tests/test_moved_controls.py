"""Every lesson still passes after a learner moves every explorer's controls.

A learner drives each explorer and then keeps running the next cells; nbmake never moves a
control, so it cannot see a cell that depends on an explorer's state. Here every notebook in
notebooks/ is executed (nbclient, as nbmake does) and, as soon as a cell has displayed an
explorer, every one of its controls is moved to another valid value (tests/moved_controls_kernel.py),
in three variants, each a fresh run of the whole notebook:

- "high": first each control alone over its range and back (a slider's min, a middle step and
  max; every option of a menu; a switch both ways), then every control to its last other value (a
  slider's max, a menu's last other option, a switch flipped);
- "low": every control to its first other value (a slider's min, the first other option, flipped);
- "random": every control to a seeded random other value (a switch flipped).

A move the widget refuses (it clamps) is allowed; an exception raised inside the explorer's
callback fails the test, and so does any cell that fails afterwards. The failure names the cell,
the values moved and the error.

    pytest tests/test_moved_controls.py               # or: pytest -k moved
    pytest tests/test_moved_controls.py -k 05_memory  # one lesson
    pytest tests/test_moved_controls.py --runxfail    # also show why listed lessons fail
"""

from __future__ import annotations

from pathlib import Path

import pytest
from moved_controls_run import describe_failures, describe_moves, run_notebook

# ==== Lessons that fail with moved controls today (strict: a listed lesson that passes FAILS) ====
# Fixed your lesson? Delete its line here, in the same commit. `--runxfail` prints the failure.
XFAIL: dict[str, str] = {}
# =================================================================================================

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
VARIANTS = ("high", "low", "random")


def _param(path: Path):
    marks = [pytest.mark.slow]
    if path.name in XFAIL:
        marks.append(pytest.mark.xfail(reason=XFAIL[path.name], strict=True))
    return pytest.param(path, id=path.stem, marks=marks)


def test_xfail_list_names_existing_lessons():
    missing = sorted(set(XFAIL) - {p.name for p in NOTEBOOKS})
    assert not missing, f"XFAIL names notebooks that are not in notebooks/: {missing}"


@pytest.mark.parametrize("path", [_param(p) for p in NOTEBOOKS])
def test_lesson_survives_moved_controls(path: Path, request):
    config = request.config
    timeout = config.getoption("nbmake_timeout", default=None) or 300  # nbmake's per-cell default
    kernel = config.getoption("nbmake_kernel", default=None)
    failures, summary = [], []
    for variant in VARIANTS:
        run = run_notebook(path, variant, sweep=variant == "high", timeout=timeout, kernel=kernel)
        failures += run.failures
        summary.append(f"{variant}: {run.seconds:.1f} s, {len(run.explorers)} explorer(s) moved")
        if variant == "high" and not run.explorers and not run.failures:
            break  # no explorer shown: the other variants would run the same lesson again
    print(f"{path.name}: " + "; ".join(summary))
    for record in run.explorers:  # what the last variant did, for the log
        print("  " + describe_moves(record))
    if failures:
        pytest.fail(describe_failures(path, failures), pytrace=False)


# ---- the harness itself: it must see a cell that depends on an explorer, and a callback error ----

EXPLORER_CELL = """
import ipywidgets as W
from matplotlib.figure import Figure
from accumlab.explorer import Explorer, int_slider

def compute(n, mode, flag):
    if flag and n == 0:
        raise ValueError("n = 0 with flag on")
    return {"n": n, "mode": mode, "flag": flag}

def plot(data):
    fig = Figure(figsize=(2, 1))
    fig.add_subplot().set_title(str(data))
    return fig

controls = {
    "n": int_slider("n", 2, 0, 5),
    "mode": W.Dropdown(options=["a", "b", "c"], value="a"),
    "flag": W.Checkbox(value=False),
}
ex = Explorer(controls, compute, plot)
"""


def _lesson(tmp_path: Path, after: str) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    cells = [EXPLORER_CELL, "ex", "import ipywidgets as W\nW.IntSlider()  # not an explorer", after]
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nb, str(path))
    return path


@pytest.mark.slow
def test_harness_reports_a_cell_that_depends_on_the_explorer(tmp_path):
    path = _lesson(tmp_path, 'assert ex.values["mode"] == "a", "expected the default mode"')
    run = run_notebook(path, "high", sweep=True, timeout=120)
    [record] = run.explorers  # the plain slider of cell 2 is not an explorer
    assert record["cell"] == 1 and record["names"] == ["ex"]
    assert record["final"] == {"n": "5", "mode": "'c'", "flag": "True"}
    sweep = [(m["control"], m["to"]) for m in record["moves"] if m["phase"] == "sweep"]
    assert ("n", "0") in sweep and ("mode", "'b'") in sweep and ("flag", "False") in sweep
    [failure] = run.failures
    assert (failure.kind, failure.cell) == ("cell", 3)
    assert "expected the default mode" in failure.error
    text = describe_failures(path, run.failures)
    assert "cell 3 failed" in text and "mode 'a' → 'c'" in text and "n 2 → 5" in text


@pytest.mark.slow
def test_harness_reports_an_error_inside_the_callback_and_goes_on(tmp_path):
    # "low" moves n to 0 and flips flag on: only that combination raises
    path = _lesson(
        tmp_path,
        'ex.controls["flag"].value = False\nassert not any("moved" in k for k in globals())',
    )
    low = run_notebook(path, "low", sweep=False, timeout=120)
    [failure] = low.failures
    assert (failure.kind, failure.cell) == ("explorer", 1)
    assert "ValueError: n = 0 with flag on" in failure.error and "'n': 0" in failure.error
    assert low.explorers[0]["final"]["flag"] == "True"  # the run went on: the last cell passed
    high = run_notebook(path, "high", sweep=False, timeout=120)  # n = 5: no error
    assert high.failures == [] and high.explorers[0]["final"] != high.explorers[0]["start"]
