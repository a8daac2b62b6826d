"""The core explorer: figure built once and updated, one draw per PNG, errors kept and shown;
the benchmark finds every lesson's explorer; torch's thread count follows the CPUs available."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import ipywidgets as W
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

import accumlab as al
from accumlab._threads import choose_threads, cpu_quota
from accumlab.explorer import Explorer, explorer_example, int_slider
from accumlab.figures import figure_png, named_artists, render_png

ROOT = Path(__file__).resolve().parents[1]


def _plot(data):
    fig = Figure(figsize=(4, 2), layout="constrained")
    ax = fig.add_subplot(gid="ax")
    ax.plot(range(3), data, gid="line")
    ax.set_title("", gid="title")
    _update(fig, data)  # as the topics' plot functions do: one code path sets the data
    return fig


def _update(fig, data):
    a = named_artists(fig)
    a["line"].set_ydata(data)
    a["ax"].set_ylim(min(data) - 1, max(data) + 1)
    a["title"].set_text(f"{data[-1]}")


def _compute(n):
    if n == 3:
        raise ValueError("n must not be 3")
    return [0, n, 2 * n]


def _explorer(**kw):
    return Explorer({"n": int_slider("n", 1, 0, 5)}, _compute, _plot, **kw)


@pytest.fixture
def draws(monkeypatch):
    """Counts Figure.draw calls (a full draw of every artist)."""
    count = [0]
    original = Figure.draw

    def counting(self, renderer):
        count[0] += 1
        return original(self, renderer)

    monkeypatch.setattr(Figure, "draw", counting)
    return count


def test_figure_is_built_once_and_updated(draws):
    ex = _explorer(update=_update)
    fig, line = ex.figure, ex.figure.axes[0].lines[0]
    position = fig.axes[0].get_position().bounds
    first = ex.image.value
    assert first[:4] == b"\x89PNG" and draws[0] == 1  # laid out and drawn in one draw
    ex.controls["n"].value = 4
    assert ex.figure is fig and fig.axes[0].lines[0] is line
    assert list(line.get_ydata()) == [0, 4, 8] and ex.data == [0, 4, 8]
    assert ex.image.value != first and draws[0] == 2  # one more draw for one change
    # the layout was frozen after the first draw: the axes did not move
    assert not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)
    assert fig.axes[0].get_position().bounds == position
    ex.controls["n"].value = 1
    assert ex.image.value == first  # the same setting draws the same picture


def test_building_spares_live_objects_from_full_collections_but_not_young_garbage():
    import gc
    import weakref

    class Node:
        pass

    cycle = Node()
    cycle.me = cycle  # garbage only the cyclic collector can free
    gone = weakref.ref(cycle)
    del cycle
    alive = Node()  # made before the explorer: no full collection walks it afterwards
    ex = _explorer(update=_update)
    assert gone() is None  # collected, not frozen
    tracked = gc.get_objects()  # the generations collections walk (not the frozen one)
    assert not any(o is alive for o in tracked) and not any(o is ex.figure for o in tracked)
    later = Node()
    assert any(o is later for o in gc.get_objects())


def test_a_move_that_clamps_another_slider_computes_once():
    """Moving the micro-batch slider lowers k's maximum, which clamps k: that clamp fires first
    and already shows the new values, so the move itself must not compute and draw again."""
    ex = al.accumulation.accumulation_explorer()
    calls = []
    compute = ex.compute
    ex.compute = lambda **values: calls.append(values) or compute(**values)
    ex.controls["micro_batch_size"].value = 16  # 32 samples: k's maximum becomes 2, k clamps 4 -> 2
    assert ex.controls["accumulation_steps"].value == 2
    assert len(calls) == 1 and calls[0]["micro_batch_size"] == 16
    ex.controls["accumulation_steps"].value = 1
    assert len(calls) == 2


def test_without_update_each_change_builds_a_new_figure():
    ex = _explorer()
    fig = ex.figure
    ex.controls["n"].value = 2
    assert ex.figure is not fig and ex.data == [0, 2, 4]


def test_caption_is_shown_above_the_figure():
    ex = _explorer(update=_update, caption=lambda d: f"<b>{d[-1]}</b>")
    ex.controls["n"].value = 5
    assert ex.summary.value == "<b>10</b>" and ex.summary in ex.widget.children
    assert _explorer().summary not in _explorer().widget.children


def test_an_error_is_kept_shown_and_cleared():
    ex = _explorer(update=_update)
    shown = ex.image.value
    with pytest.raises(ValueError, match="must not be 3"):
        ex.controls["n"].value = 3
    assert isinstance(ex.error, ValueError) and ex.image.value == shown  # last good figure
    ex.controls["n"].value = 4
    assert ex.error is None and ex.data == [0, 4, 8]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"controls\['n'\] must be an ipywidgets control"):
        Explorer({"n": 3}, _compute, _plot)
    with pytest.raises(ValueError, match="update"):
        _explorer(update="not a function")
    with pytest.raises(ValueError, match="caption"):
        _explorer(caption=3)


def test_pngs_are_drawn_once(draws):
    fixed = Figure(figsize=(3, 2))
    fixed.add_subplot().plot([1, 2])
    assert figure_png(fixed)[:4] == b"\x89PNG" and draws[0] == 1  # no tight bounding box pass
    assert render_png(fixed)[:4] == b"\x89PNG" and draws[0] == 2
    canvas = fixed.canvas
    render_png(fixed)
    assert fixed.canvas is canvas  # the same canvas (and its text cache) on every redraw


def test_named_artists():
    fig = _plot([1, 2, 3])
    a = named_artists(fig)
    assert a["line"] is fig.axes[0].lines[0] and a["ax"] is fig.axes[0]
    assert a["title"] is fig.axes[0].title


def test_explorer_example_marks_a_factory():
    @explorer_example(lambda: {"x": 1})
    def some_explorer(x):
        return x

    assert some_explorer.example_arguments() == {"x": 1} and some_explorer(2) == 2


# --- the benchmark finds every explorer ------------------------------------------------------


def _benchmark():
    path = ROOT / "benchmarks" / "widget_latency.py"
    spec = importlib.util.spec_from_file_location("widget_latency", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_discovers_every_explorer_a_lesson_builds():
    import inspect

    bench = _benchmark()
    found = dict(bench.discover())
    called = set()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        called |= {f"{t}.{n}" for t, n in re.findall(r"\bal\.(\w+)\.(\w+_explorer)\(", code)}
    called = {c for c in called if not c.split(".")[1].startswith(("plot_", "update_"))}
    assert called and called <= set(found), called - set(found)
    assert set(bench.lessons_calling()) >= called
    for label, factory in found.items():  # each can be built on its own
        required = [
            p
            for p in inspect.signature(factory).parameters.values()
            if p.default is inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD
        ]
        assert not required or hasattr(factory, "example_arguments"), label


def test_benchmark_moves_every_kind_of_control():
    sweep = _benchmark().sweep
    slider = int_slider("k", 4, 1, 32)
    assert sweep(slider, 5) == [1, 9, 16, 24, 32, 4]  # across the range, then back
    menu = W.Dropdown(options=[("a", 1), ("b", 2)], value=2)
    assert sweep(menu, 9) == [1, 2, 2]
    assert sweep(W.Checkbox(value=True), 9) == [False, True]
    floats = W.FloatSlider(value=0.5, min=0.05, max=2.0, step=0.05)
    values = sweep(floats, 5)
    assert values[0] == 0.05 and values[-2] == 2.0 and values[-1] == 0.5


# --- threads ---------------------------------------------------------------------------------


def test_thread_choice():
    assert choose_threads({"OMP_NUM_THREADS": "3"}, affinity=8).threads == 3
    assert choose_threads({}, affinity=2, quota=None).threads == 1
    assert choose_threads({}, affinity=1, quota=None).threads == 1
    assert choose_threads({}, affinity=8, quota=None).threads == 7
    pod = choose_threads({}, affinity=16, quota=1.0)  # a pod's quota on a big node
    assert pod.threads == 1 and "quota 1" in pod.reason
    assert choose_threads({}, affinity=16, quota=4.5).threads == 3


def test_cpu_quota_reads_cgroup_v2_and_v1(tmp_path):
    proc = tmp_path / "cgroup"
    root = tmp_path / "fs"
    (root / "pod" / "kernel").mkdir(parents=True)
    (root / "cpu.max").write_text("max 100000\n")
    (root / "pod" / "cpu.max").write_text("150000 100000\n")
    (root / "pod" / "kernel" / "cpu.max").write_text("max 100000\n")
    proc.write_text("0::/pod/kernel\n")
    assert cpu_quota(proc, root) == 1.5  # the parent's limit applies to its children
    proc.write_text("0::/\n")
    assert cpu_quota(proc, root) is None
    v1 = root / "cpu,cpuacct" / "docker"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("200000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    proc.write_text("4:cpu,cpuacct:/docker\n")
    assert cpu_quota(proc, root) == 2.0
    assert cpu_quota(tmp_path / "missing", root) is None


def test_setup_sizes_torch_threads_and_says_so():
    before = torch.get_num_threads()
    try:
        env = al.setup(threads=1)
        assert torch.get_num_threads() == 1 and "1 torch thread(s) (asked for)" in str(env)
        env = al.setup()
        chosen = choose_threads()
        assert env.threads == chosen.threads == torch.get_num_threads()
        assert f"{chosen.threads} torch thread(s) ({chosen.reason})" in str(env)
        with pytest.raises(ValueError, match="threads must be an integer >= 1, got 0"):
            al.setup(threads=0)
    finally:
        torch.set_num_threads(before)
