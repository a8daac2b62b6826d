"""Lesson 11: the real Accelerate, Lightning and Transformers Trainer, measured against the
reference. The semantics asserted here are those of the installed versions (pyproject's lower
bounds); each test names the source line it measures."""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import socket
import subprocess
import sys
import tempfile

import pytest
import torch

import accumlab as al

F = al.frameworks


@pytest.fixture(scope="module")
def runs():
    return F.run_all(progress=False)


@pytest.fixture(scope="module")
def table(runs):
    return F.framework_table(runs)


def _worst(steps) -> float:
    return max(c.grad_error for c in steps)


# --- bad input: a ValueError naming the parameter and the value -----------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"data": "images"}, "data.*'images'"),
        ({"k": 0}, "k.*0"),
        ({"k": 11}, "k must be at most 10.*11"),
        ({"k": True}, "k.*True"),
        ({"k": 2.0}, "k.*2.0"),
        ({"lr": -1}, "lr.*-1"),
        ({"lr": "0.1"}, "lr.*'0.1'"),
    ],
)
def test_make_problem_rejects(kwargs, match):
    with pytest.raises(ValueError, match=match):
        F.make_problem(**kwargs)


def test_run_functions_reject_bad_names():
    with pytest.raises(ValueError, match="name.*'keras'"):
        F.run_framework("keras")
    with pytest.raises(ValueError, match="name.*'keras'"):
        F.run_all(("keras",), progress=False)
    with pytest.raises(ValueError, match="runner must be callable.*got int"):
        F.run_loop(3)
    with pytest.raises(ValueError, match="data.*'images'"):
        F.run_framework("reference", "images")


def test_table_rejects_incomplete_runs(runs):
    with pytest.raises(ValueError, match="'regression' and 'tokens'"):
        F.framework_table({"regression": runs["regression"]})
    no_ref = {d: {n: r for n, r in by.items() if n != "reference"} for d, by in runs.items()}
    with pytest.raises(ValueError, match="'reference'"):
        F.framework_table(no_ref)
    mixed = {
        "regression": runs["regression"],
        "tokens": {"reference": F.run_framework("reference", "tokens", 3)},
    }
    with pytest.raises(ValueError, match="same k"):
        F.framework_table(mixed)


def test_explorer_rejects_bad_grids(runs):
    grid = F.framework_grid(("accelerate",), (2, 4), progress=False, runs=runs)
    with pytest.raises(ValueError, match="not in the grid"):
        F.explore_frameworks(grid, "accelerate", "regression", 3)
    with pytest.raises(ValueError, match="consecutive"):
        F.framework_explorer(grid)  # k = 2 and 4: a slider would reach the uncached k = 3
    with pytest.raises(ValueError, match="non-empty dict"):
        F.framework_explorer({})
    with pytest.raises(ValueError, match="data.*'images'"):
        F.framework_grid(("accelerate",), (2,), ("images",), progress=False)


def test_a_runaway_loop_is_stopped():
    def forever(problem, model, optimizer, scheduler, folder):
        while True:
            model(problem.micro_batches()[0].x)

    with pytest.raises(ValueError, match="runner was stopped: more than 56 forward passes"):
        F.run_loop(forever, "regression", 4)


# --- the harness ---------------------------------------------------------------------------------


@pytest.mark.parametrize("data", ["regression", "tokens"])
def test_reference_run_ends_where_the_engine_ends(runs, data):
    p = F.make_problem(data, 4)
    trace = al.run(
        al.Recipe(p.micro_batch_size, 4, normalization="global"),
        p.model(),
        p.data,
        loss=p.loss_name,
        lr=p.lr,
        scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, F.lr_factor),
    )
    engine = al.params_of(trace.model)
    hooks = runs[data]["reference"].final_params
    assert all(torch.allclose(engine[n], hooks[n], rtol=0, atol=1e-14) for n in engine)
    assert _worst(F.check_run(runs[data]["reference"])) < 1e-12


def test_a_wrong_loop_is_measured_as_wrong():
    """The checks must be able to fail: a loop that never divides is k times the reference."""

    def undivided(problem, model, optimizer, scheduler, folder):
        batches = problem.micro_batches()
        for window in problem.windows():
            for i in window:
                problem.mean_loss(model(batches[i].x), batches[i].y).backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        return {}

    checks = F.check_run(F.run_loop(undivided, "regression", 4))
    assert [c.divided_by for c in checks] == ["Σ means ÷ 1"] * 3
    assert [round(c.scale, 9) for c in checks] == [4, 4, 2]


# --- what each framework does (source line in the docstring), measured --------------------------


def test_accelerate_divides_every_window_by_k(table, runs):
    """accelerator.py `backward`: loss / gradient_accumulation_steps; `_do_sync`: step at k and at
    the end of a prepared dataloader."""
    reg, tok = table.checks["regression"]["accelerate"], table.checks["tokens"]["accelerate"]
    assert _worst(reg[:2]) < 1e-12 and math.isclose(reg[-1].scale, 0.5, rel_tol=1e-12)
    assert {c.divided_by for c in tok} == {"Σ means ÷ 4"}
    run = runs["regression"]["accelerate"]
    assert run.zero_grads == [4, 8, 10] and run.scheduler_steps == [4, 8, 10]
    assert run.logged_loss is None


def test_accelerate_scheduler_counts_no_skipped_call_even_with_adjust_scheduler_asked():
    """scheduler.py counts `_step_count` while accumulating only if `GradientState.adjust_scheduler`;
    state.py reads it from the plugin's `to_kwargs`, which drops values equal to the defaults, so
    the default True (given or not) is read as False. The lesson's 3.1 says so."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState
    from accelerate.utils import GradientAccumulationPlugin

    run = F.run_framework("accelerate", "regression", 4)
    assert (run.extra["scheduler_counted"], run.extra["scheduler_stepped"]) == (3, 3)
    plugin = GradientAccumulationPlugin(num_steps=4, adjust_scheduler=True)
    try:
        accelerator = Accelerator(gradient_accumulation_plugin=plugin, cpu=True)
        assert accelerator.gradient_state.adjust_scheduler is False
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
        GradientState._reset_state()


def test_accelerate_docs_recipe_is_exact_and_unprepared_loader_drops_the_last_window():
    fixes = F.run_all(("accelerate_global", "accelerate_unprepared"), progress=False)
    for data in F.DATASETS:
        assert _worst(F.check_run(fixes[data]["accelerate_global"])) < 1e-12
        assert [len(w) for w in fixes[data]["accelerate_unprepared"].windows] == [4, 4]


def test_a_second_accelerator_inherits_sync_gradients():
    """state.py: GradientState is shared by every Accelerator; sync_gradients is set once."""
    F.run_framework("accelerate_unprepared", "regression", 4)  # ends mid-window
    assert len(F.run_framework("accelerate_global", "regression", 4, reset_sync=False).steps) == 0
    assert len(F.run_framework("accelerate_global", "regression", 4).steps) == 3


def test_lightning_divides_by_k_zeroes_after_the_first_forward_and_logs_the_last_batch(table, runs):
    """automatic.py: closure_loss / accumulate_grad_batches; zero_grad in the closure of a
    window's first batch; training_epoch_loop.py: "Lightning steps on the final batch"."""
    reg, tok = table.checks["regression"]["lightning"], table.checks["tokens"]["lightning"]
    assert math.isclose(reg[-1].scale, 0.5, rel_tol=1e-12)
    assert {c.divided_by for c in tok} == {"Σ means ÷ 4"}
    run = runs["regression"]["lightning"]
    assert run.zero_grads == [1, 5, 9]
    assert {c.logged_as for c in reg} == {"last micro-batch"}
    assert math.isclose(run.extra["callback_loss"][9] * 4, run.logged_loss[2], rel_tol=1e-12)
    # the closure runs the last micro-batch inside step(): a pre-hook misses it
    assert min(c.pre_hook_error for c in reg) > 0.1
    assert max(c.pre_hook_error for c in table.checks["regression"]["accelerate"]) == 0.0
    exact = F.run_all(("lightning_exact",), progress=False)
    assert all(_worst(F.check_run(exact[d]["lightning_exact"])) < 1e-12 for d in F.DATASETS)


def test_trainer_divides_by_the_window_it_holds_unless_it_counts_items(table):
    """trainer.py `training_step`: loss / current_gradient_accumulation_steps, unless
    loss_is_scaled_for_ga (model takes **kwargs and num_items_in_batch was counted)."""
    reg, tok = table.checks["regression"]["trainer"], table.checks["tokens"]["trainer"]
    assert _worst(reg) < 1e-12
    assert [c.divided_by for c in tok] == ["Σ means ÷ 4", "Σ means ÷ 4", "Σ means ÷ 2"]
    assert {c.logged_as for c in tok} == {"mean of micro-batch means"}
    counted = table.checks["tokens"]["trainer_num_items"]
    assert _worst(counted) < 1e-12 and {c.logged_as for c in counted} == {"window mean"}
    assert all(math.isclose(c.logged_grad_norm, c.grad_norm, rel_tol=1e-12) for c in counted)
    assert 1e-12 < max(c.loss_error for c in counted) < 1e-6  # logged through float32


def test_trainer_kwargs_ignored_and_default_clip():
    variants = F.run_all(("trainer_kwargs_ignored", "trainer_default_clip"), progress=False)
    ignored = F.check_run(variants["regression"]["trainer_kwargs_ignored"])
    assert [round(c.scale, 9) for c in ignored] == [4, 4, 2]
    clipped = F.check_run(variants["regression"]["trainer_default_clip"])
    assert F.default_max_grad_norm() == 1.0
    for c in clipped:
        assert math.isclose(c.grad_norm, c.reference_norm / (c.reference_norm + 1e-6), rel_tol=1e-9)
        assert math.isclose(c.logged_grad_norm, c.reference_norm, rel_tol=1e-9)


@pytest.mark.skipif(
    not importlib.util.find_spec("deepspeed"), reason="the real engine needs deepspeed"
)
def test_real_deepspeed_divides_in_backward_and_never_resets_its_counter():
    runs = F.run_all(("deepspeed", "deepspeed_double", "deepspeed_exact"), progress=False)
    for data in F.DATASETS:
        assert runs[data]["deepspeed"].version.startswith("deepspeed ")  # the real engine ran
        documented = F.check_run(runs[data]["deepspeed"])
        twice = F.check_run(runs[data]["deepspeed_double"])
        exact = F.check_run(runs[data]["deepspeed_exact"])
        assert [len(c.window) for c in documented] == [4, 4]  # managed: the short window waits
        assert {c.divided_by for c in twice} == {"Σ means ÷ 16"}
        assert len(exact) == 3 and max(c.grad_error for c in exact) < 1e-5  # float32 tolerance
        assert min(c.grad_error for c in exact) > 1e-9  # float32 really ran: not float64 round-off
    reg = F.check_run(runs["regression"]["deepspeed"])
    assert max(c.grad_error for c in reg) < 1e-5  # ÷ k once: exact on equal micro-batches
    assert all(
        abs(c.scale - 0.25) < 1e-5 for c in F.check_run(runs["regression"]["deepspeed_double"])
    )
    two = F.run_framework("deepspeed", "regression", 4, epochs=2)
    assert two.windows == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 0, 1), (2, 3, 4, 5), (6, 7, 8, 9)]
    # caller-owned boundaries: one step() per window, exact; the boundary flag, once set, stays
    unmanaged = F.run_all(("deepspeed_unmanaged",), progress=False)
    for data in F.DATASETS:
        steps = F.check_run(unmanaged[data]["deepspeed_unmanaged"])
        assert [len(c.window) for c in steps] == [4, 4, 2] and _worst(steps) < 1e-5
    once = F.run_framework("deepspeed_boundary_once", "regression", 4, epochs=2)
    assert once.version.startswith("deepspeed ")
    assert [len(w) for w in once.windows] == [4, 4, 2] + [1] * 10
    assert "WORLD_SIZE" not in os.environ and "MASTER_PORT" not in os.environ  # put back


def test_a_hand_set_sync_drops_the_short_window_and_prefetching_moves_the_sync():
    """sync_gradients set by hand, True every k-th micro-batch only, never steps a short window;
    a prefetch left to accumulate() changes when the loader reports its end; the usage guide's
    variable-size skeleton, as written, steps the short window and is exact."""
    names = ("accelerate_handset", "accelerate_prefetch", "accelerate_prefetch_all")
    runs = F.run_all((*names, "accelerate_global"), progress=False)
    for data in F.DATASETS:
        ends = {n: [s.end for s in runs[data][n].steps] for n in (*names, "accelerate_global")}
        assert ends == {
            "accelerate_handset": [4, 8],
            "accelerate_prefetch": [4, 8, 9, 10],
            "accelerate_prefetch_all": [4, 8],
            "accelerate_global": [4, 8, 10],
        }
        assert _worst(F.check_run(runs[data]["accelerate_handset"])) < 1e-12
        assert _worst(F.check_run(runs[data]["accelerate_global"])) < 1e-12


def test_a_loader_left_mid_iteration_does_not_reach_the_next_accelerator():
    """GradientState lists the prepared loaders being iterated: one left at its last batch would
    make every accumulate() of the next Accelerator sync (steps after 1, 2, 3, ...)."""
    from functools import partial

    from accumlab.frameworks.accelerate_watch import accelerate_custom_loop

    def stop_at_last_batch(accelerator, model, optimizer, scheduler, loader, k):
        batches = iter(loader)
        for _ in range(len(loader)):
            next(batches)  # never asked for one more: the loader stays at its last batch

    # an exercise run: its Accelerator (wrapped methods: a reference cycle) keeps the loader alive
    F.run_loop(partial(accelerate_custom_loop, epoch_fn=stop_at_last_batch), "tokens", 4)
    # list(loader) first: while its accumulate() calls run, no loader of its own is iterated
    run = F.run_framework("accelerate_prefetch_all", "tokens", 4)
    assert [s.end for s in run.steps] == [4, 8]


def test_stand_in_replaces_deepspeed_only_where_it_is_missing_and_says_so(monkeypatch):
    from accumlab.frameworks import with_deepspeed

    monkeypatch.setattr(with_deepspeed, "deepspeed_installed", lambda: False)
    runs = F.run_all(("deepspeed", "deepspeed_double"), ("regression",), progress=False)
    assert runs["regression"]["deepspeed"].version.startswith("STAND-IN")
    documented = F.check_run(runs["regression"]["deepspeed"])
    assert len(documented) == 2 and _worst(documented) < 1e-5
    assert [round(c.scale, 6) for c in F.check_run(runs["regression"]["deepspeed_double"])] == [
        0.25,
        0.25,
    ]
    exact = F.check_run(F.run_framework("deepspeed_exact", "tokens", 4))
    assert len(exact) == 3 and _worst(exact) < 1e-5  # the boundary override, as DeepSpeed's
    unmanaged = F.check_run(F.run_framework("deepspeed_unmanaged", "tokens", 4))
    assert len(unmanaged) == 3 and _worst(unmanaged) < 1e-5  # every step() a boundary
    once = F.run_framework("deepspeed_boundary_once", "regression", 4, epochs=2)
    assert [len(w) for w in once.windows] == [4, 4, 2] + [1] * 10  # the flag stays set
    model = al.mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = F.StandInEngine(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, F.lr_factor), 4)
    assert float(engine.backward(torch.tensor(8.0, requires_grad=True))) == 2.0
    assert float(engine.backward(torch.tensor(8.0, requires_grad=True), scale_wrt_gas=False)) == 8.0


def test_table_cells_come_from_the_runs(table):
    md = table._repr_markdown_()
    for version in F.versions().values():
        assert version in md
    assert "the table holds for these versions" in md
    short, tokens = "regression: short last window", "tokens: worst step vs reference"
    assert table.row("accelerate")[short].startswith("×0.5")
    assert table.row("trainer")[short] == "exact"
    assert table.row("deepspeed")[short].startswith("never stepped")
    assert table.row("trainer_num_items")[tokens] == "exact"
    assert (
        table.row("deepspeed")["regression: zero_grad calls, after forwards"] == "none"
    )  # .grad = None
    with pytest.raises(ValueError, match="'keras'"):
        table.row("keras")


# --- no network, no files, no global side effects ------------------------------------------------


def test_runs_need_no_network_and_leave_nothing_behind(monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    threads = torch.get_num_threads()
    levels = {n: logging.getLogger(n).level for n in ("lightning.pytorch", "transformers")}
    env = {n: os.environ.get(n) for n in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    for name in ("accelerate", "lightning", "trainer", "trainer_num_items"):
        assert len(F.run_framework(name, "tokens", 4).steps) == 3
    assert torch.equal(torch.rand(3), expected)  # the Trainer's set_seed did not leak out
    assert torch.get_num_threads() == threads
    assert {n: logging.getLogger(n).level for n in levels} == levels
    assert {n: os.environ.get(n) for n in env} == env
    assert list(tmp_path.iterdir()) == []  # no checkpoint, no lightning_logs, no output_dir


def test_import_accumlab_imports_no_framework():
    code = (
        "import sys, accumlab as al; al.frameworks.make_problem(); "
        "print(sorted(m for m in ('accelerate', 'lightning', 'transformers', 'deepspeed') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the explorer --------------------------------------------------------------------------------


def test_explorer_updates_one_figure_from_the_cache(runs):
    grid = F.framework_grid(("accelerate", "lightning"), (3, 4, 5), progress=False, runs=runs)
    ex = F.framework_explorer(grid)
    figure = ex.figure
    ex.controls["framework"].value = "lightning"
    ex.controls["k"].value = 3
    assert ex.figure is figure and len(figure.axes[0].lines) == 2  # data line + dashed threshold
    assert ex.data["windows"] == [3, 3, 3, 1]
    assert math.isclose(ex.data["grad_error"][-1], 2 / 3, rel_tol=1e-9)
    ex.controls["framework"].value = "accelerate"
    assert all(math.isnan(v) for v in ex.data["loss_error"])  # Accelerate logs nothing
    assert figure.axes[1].texts[0].get_text() == "logs no loss by itself"
    ex.controls["k"].value = 5
    assert _worst_values(ex.data["grad_error"]) < 1e-12
    assert set(ex.controls["k"].options if hasattr(ex.controls["k"], "options") else []) <= {
        3,
        4,
        5,
    }
    assert (ex.controls["k"].min, ex.controls["k"].max) == (3, 5)


def _worst_values(values) -> float:
    return max(values)


def test_plots_return_figures(table):
    fig = F.plot_step_errors(table)
    assert len(fig.axes) == 2
    data = F.explore_frameworks(
        {("trainer", "tokens", 4): table.checks["tokens"]["trainer"]}, "trainer", "tokens", 4
    )
    fig = F.plot_step_explorer(data)
    assert list(fig.axes[0].lines[-1].get_xdata()) == [1, 2, 3]  # lines[0]: the dashed threshold
    wide = F.plot_step_explorer(data, max_steps=10)
    assert wide.axes[0].get_xlim() == (0.5, 10.5)
    F.update_step_explorer(wide, {**data, "grad_error": data["grad_error"][:2]})
    assert list(wide.axes[0].lines[-1].get_xdata()) == [1, 2]


def test_every_public_name_resolves():
    assert "frameworks" in al.TOPICS
    for name in F.__all__:
        assert getattr(F, name) is not None, name


@pytest.mark.skipif(
    not importlib.util.find_spec("deepspeed"), reason="the real engine needs deepspeed"
)
def test_deepspeed_batch_triple_is_filled_in_and_checked():
    from accumlab.frameworks.deepspeed_process import one_process_group

    def engine_with(config):
        model = al.mlp(4, 8, depth=1, dtype=torch.float32)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        return deepspeed.initialize(model=model, optimizer=optimizer, config=config)[0]

    with one_process_group() as deepspeed:
        two = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 3}
        assert engine_with(two).train_batch_size() == 12  # micro × k × 1 process
        three = {**two, "train_batch_size": 16}
        with pytest.raises(AssertionError, match="16"):
            engine_with(three)
    triple = F.deepspeed_batch_triple(16)  # the total alone: k = 1
    assert (triple["gradient_accumulation_steps"], triple["train_micro_batch_size_per_gpu"]) == (
        1,
        16,
    )
    assert "10 != 4 * 2 * 1" in F.deepspeed_batch_triple(10, 4)["refused"]
    with pytest.raises(ValueError, match="gradient_accumulation_steps.*0"):
        F.deepspeed_batch_triple(16, 4, 0)


# --- a machine with a GPU: every run still asks for the CPU ----------------------------------------

_ON_A_GPU_MACHINE = """
import sys
sys.path.insert(0, {tests!r})
from cuda_layer import SimulatedGpu
import accumlab as al

F = al.frameworks
with SimulatedGpu() as gpu:  # CUDA is what DeepSpeed's accelerator detection sees
    for name in F.ALL:  # in the lesson's order: the Trainer's run imports deepspeed first
        run = F.run_framework(name, "regression", 4)
        assert not any(gpu.on_gpu(p) for p in run.final_params.values()), name
        if name == "deepspeed":
            assert run.version.startswith("deepspeed "), run.version  # the real engine, on the CPU
            assert [len(w) for w in run.windows] == [4, 4], run.windows
    from deepspeed.accelerator import get_accelerator, set_accelerator

    # none was chosen before the lesson's runs: DeepSpeed used after them detects the GPU
    assert get_accelerator().device_name() == "cuda", get_accelerator().device_name()
    # deepspeed imported earlier with the CUDA accelerator (a learner's own import): the run
    # switches to the CPU one, and puts the learner's back afterwards
    from deepspeed.accelerator.cuda_accelerator import CUDA_Accelerator

    set_accelerator(CUDA_Accelerator())
    run = F.run_framework("deepspeed_exact", "tokens", 4)
    assert run.version.startswith("deepspeed ") and len(run.windows) == 3, run.windows
    assert not any(gpu.on_gpu(p) for p in run.final_params.values())
    assert get_accelerator().device_name() == "cuda"
print("ok")
"""


@pytest.mark.skipif(
    not importlib.util.find_spec("deepspeed"), reason="the real engine needs deepspeed"
)
def test_every_run_asks_for_the_cpu_where_cuda_is_detected():
    """DeepSpeed picks its accelerator on its first get_accelerator() call, which `import
    deepspeed` makes (deepspeed/accelerator/real_accelerator.py), and keeps it; the Trainer's run
    imports deepspeed (accelerate's unwrap_model). In a fresh interpreter, with tests/cuda_layer
    making torch.cuda report a GPU, every framework must still train on the CPU."""
    tests = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [sys.executable, "-c", _ON_A_GPU_MACHINE.format(tests=tests)],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "DS_ACCELERATOR"},
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_a_zero_gradient_is_named_not_divided_by():
    """A step whose gradient is zero (gradients cleared just before step()) is a multiple of
    everything with factor 0: the check names it instead of dividing by 0."""
    from accumlab.frameworks.measure import _divided_by

    terms = {
        "g_ref": torch.ones(3, dtype=torch.float64),
        "g_means": torch.full((3,), 2.0, dtype=torch.float64),
    }
    assert _divided_by(torch.zeros(3, dtype=torch.float64), terms) == "a zero gradient"
    assert _divided_by(torch.full((3,), 0.5, dtype=torch.float64), terms) == "Σ means ÷ 4"


# --- what a run reports about itself, and what it leaves behind -----------------------------------


@pytest.mark.skipif(
    not importlib.util.find_spec("deepspeed"), reason="the real engine needs deepspeed"
)
def test_deepspeed_runs_report_the_engine_object_not_the_package(monkeypatch):
    """`deepspeed_engine` is an isinstance check on the engine built: a stand-in that reports
    DeepSpeed's version (lesson 11's cell 5 mutation) is told apart."""
    from contextlib import contextmanager

    from accumlab.frameworks import with_deepspeed

    run = F.run_framework("deepspeed", "regression", 4)
    assert run.extra["deepspeed_engine"] is True and run.extra["monitor_enabled"] is False

    @contextmanager
    def impostor(problem, model, optimizer, scheduler, *, managed=True):
        engine = F.StandInEngine(model, optimizer, scheduler, problem.k, managed=managed)
        yield engine, f"deepspeed {F.versions()['deepspeed'].split()[-1]}"

    monkeypatch.setattr(with_deepspeed, "_engine", impostor)
    faked = F.run_framework("deepspeed", "regression", 4)
    assert faked.version == run.version  # the version alone cannot tell
    assert faked.extra["deepspeed_engine"] is False


def test_runs_leave_no_process_group_and_put_accelerate_state_back():
    import torch.distributed as dist
    from accelerate import PartialState
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    names = ["accelerate", "trainer"]
    if importlib.util.find_spec("deepspeed"):
        names.append("deepspeed")
    F.run_all(names, ("regression",), progress=False)
    assert not dist.is_initialized()  # DeepSpeed's gloo group destroyed with its run
    assert F.accelerate_state_is_empty()  # no cpu=True state for a later GPU Accelerator
    # a state made before the runs (a learner's own Accelerator) is put back as it was
    PartialState(cpu=True)
    before = dict(PartialState._shared_state)
    F.run_framework("accelerate", "regression", 4)
    assert dict(PartialState._shared_state) == before
    AcceleratorState._reset_state(reset_partial_state=True)
    if importlib.util.find_spec("deepspeed"):  # the group is made again for the next run
        again = F.run_framework("deepspeed_exact", "tokens", 4)
        assert again.extra["deepspeed_engine"] and not dist.is_initialized()


def test_trainer_passes_the_count_only_to_a_forward_with_kwargs():
    """trainer.py: `model_accepts_loss_kwargs` is a VAR_KEYWORD parameter (or the model's
    `accepts_loss_kwargs`): naming `num_items_in_batch` alone gets no count."""
    named = F.check_run(F.run_framework("trainer_named_only", "tokens", 4))
    assert [c.divided_by for c in named] == ["Σ means ÷ 4", "Σ means ÷ 4", "Σ means ÷ 2"]
    defaults = F.trainer_defaults()
    assert defaults == {
        "max_grad_norm": 1.0,
        "logging_steps": 500,
        "average_tokens_across_devices": True,
    }


def test_lightning_scheduler_frequency_counts_batches():
    every = F.run_framework("lightning", "regression", 4)
    third = F.run_framework("lightning", "regression", 4, frequency=3)
    assert every.scheduler_steps == [4, 8, 10] and third.scheduler_steps == []
    assert [s.end for s in third.steps] == [4, 8, 10]  # the optimizer still steps
    with pytest.raises(ValueError, match="frequency.*0"):
        F.run_framework("lightning", "regression", 4, frequency=0)


def test_another_token_seed_changes_the_window_counts():
    def counts(p):
        batches = p.micro_batches()
        return [sum(p.items(batches[i].y) for i in w) for w in p.windows()]

    assert counts(F.make_problem("tokens", 4)) == [48, 40, 15]
    assert counts(F.make_problem("tokens", 4, seed=1)) == [52, 52, 25]
    with pytest.raises(ValueError, match="seed.*-1"):
        F.make_problem("tokens", seed=-1)


def test_backward_saw_names_one_rule_where_equal_micro_batches_make_two_coincide(runs):
    # measure.saw_label: on equal micro-batches a step can be both exact and a Σ means ÷ D
    grid = F.framework_grid(("reference", "plain_loop", "trainer"), (3, 4), progress=False)
    saw = {key: F.explore_frameworks(grid, *key)["divided_by"] for key in grid}
    # the textbook loop divides by k in every window: its rule, not the reference's, for all four
    assert saw[("plain_loop", "regression", 3)] == "Σ means ÷ 3"
    # exact at every step: the reference's rule, with what it equals here
    assert saw[("reference", "regression", 4)] == (
        "Σ item losses ÷ window items (equal here: Σ means ÷ 4, 2)"
    )
    assert saw[("trainer", "regression", 3)].startswith("Σ item losses ÷ window items (equal here")
    assert saw[("trainer", "tokens", 4)] == "Σ means ÷ 4, 2"  # unequal: nothing coincides
    assert saw[("reference", "tokens", 3)] == "Σ item losses ÷ window items"
    table = F.framework_table(runs)
    assert table.row("plain_loop")["tokens: backward saw"] == "Σ means ÷ 4"


def test_the_never_stepped_note_sits_above_the_plot(runs):
    checks = F.check_run(runs["regression"]["deepspeed"])  # 2 of 3 windows stepped
    data = F.explore_frameworks(
        {("deepspeed", "regression", 4): checks}, "deepspeed", "regression", 4
    )
    fig = F.plot_step_explorer(data)
    note = next(t for t in fig.axes[0].texts if t.get_gid() == "missing")
    assert note.get_text() == "1 window(s) never stepped"
    assert note.get_position()[1] >= 1  # axes coordinates: outside the area the line is drawn in


def test_a_reshuffled_loader_gives_another_order_each_pass_and_refuses_two_pass_counts():
    from torch.utils.data import DataLoader, TensorDataset

    from accumlab.frameworks.hooks import micro_batch_index
    from accumlab.frameworks.with_accelerate import ReshuffledMicroBatches

    problem = F.make_problem("tokens", 4)
    data = problem.data
    loader = DataLoader(
        TensorDataset(data.x, data.y), batch_sampler=ReshuffledMicroBatches(problem, 0)
    )
    index = micro_batch_index(problem.micro_batches())
    first, second = ([index(x) for x, _ in loader] for _ in range(2))
    assert sorted(first) == sorted(second) == list(range(10))  # the problem's own micro-batches
    assert first != second  # reshuffled on every pass
    with pytest.raises(ValueError, match="seed"):
        ReshuffledMicroBatches(problem, -1)

    def two_passes(accelerator, model, optimizer, scheduler, loader, k):
        counts = [int((y != al.IGNORE_INDEX).sum()) for _, y in loader]
        tokens = [sum(counts[i : i + k]) for i in range(0, len(counts), k)]
        for i, (x, y) in enumerate(loader):
            with accelerator.accumulate(model):
                loss = torch.nn.functional.cross_entropy(
                    model(x).flatten(0, 1),
                    y.flatten(),
                    ignore_index=al.IGNORE_INDEX,
                    reduction="sum",
                )
                accelerator.backward(loss * k / tokens[i // k])
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()

    result = al.check("11.3", two_passes)
    assert not result.ok and "another order" in str(result)


def test_lesson_11s_source_statements_hold_in_the_installed_packages():
    """Cells 34 and 37 state two things read from the frameworks' sources, not run here: the
    Trainer turns DeepSpeed's ÷ k off whatever it decided about the loss (transformers #45305),
    and DeepSpeed's pipeline engine refuses forward, backward and step outside train_batch()."""
    import inspect

    from transformers import Trainer

    step = inspect.getsource(Trainer.training_step)
    decided, turned_off = (
        step.find("loss_is_scaled_for_ga ="),
        step.find('"scale_wrt_gas"] = False'),
    )
    assert -1 < decided < turned_off, "training_step no longer sets scale_wrt_gas=False after"
    # ... the ÷ k it skips for a loss it takes as normalised by num_items_in_batch
    assert "if not loss_is_scaled_for_ga:" in step[decided:turned_off]
    if importlib.util.find_spec("deepspeed") is None:
        pytest.skip("deepspeed is not installed")
    from deepspeed.runtime.pipe.engine import PipelineEngine

    for name in ("forward", "backward", "step"):
        source = inspect.getsource(getattr(PipelineEngine, name))
        assert 'PipelineError("Only train_batch() is accessible in pipeline mode.")' in source, name
    assert "self.gradient_accumulation_steps()" in inspect.getsource(PipelineEngine.train_batch)
