"""Lesson 10: step counters, the interruptible loop, exact resume and each omission's damage,
logging rules, the token budget, plots and the explorer — and the real frameworks' step counts."""

import dataclasses
import math
import re

import pytest
import torch
from matplotlib.figure import Figure

import accumlab as al

bk = al.bookkeeping
SMALL = bk.Setup(
    batches_per_epoch=11, epochs=2, accumulation_steps=3
)  # 4 windows per epoch: 3,3,3,2


def _same(a, b) -> bool:
    """Structural, bit-for-bit equality of two checkpoints."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


# --- counters.py -----------------------------------------------------------------------------


def test_schedules_by_hand():
    # 5 micro-batches per epoch, k = 2, 2 epochs (micro-steps 0-4 and 5-9)
    per_epoch = bk.step_schedule(5, 2, 2, "per_epoch")
    assert per_epoch.windows == ((0, 1), (2, 3), (4, 5, 6), (7, 8))
    assert per_epoch.leftover == (9,) and per_epoch.straddling() == [2]
    at_end = bk.step_schedule(5, 2, 2, "sync_at_epoch_end")
    assert at_end.windows == ((0, 1), (2, 3), (4,), (5, 6), (7, 8), (9,))
    assert at_end.leftover == () and at_end.straddling() == []
    assert at_end.steps_per_epoch() == [3, 3] and at_end.histogram() == {1: 2, 2: 4}
    glob = bk.step_schedule(5, 2, 2, "global")
    assert glob.windows == ((0, 1), (2, 3), (4, 5), (6, 7), (8, 9)) and glob.straddling() == [2]
    assert at_end.window_lengths() == [2, 2, 2, 2, 1, 2, 2, 2, 2, 1]
    assert per_epoch.window_lengths()[9] == 0  # leftover: never in a window
    assert at_end.ends_window() == [False, True, False, True, True] * 2
    assert [at_end.position_after(s) for s in range(7)] == [0, 2, 4, 5, 7, 9, 10]


@pytest.mark.parametrize("b, k, epochs", [(103, 4, 3), (100, 4, 3), (3, 5, 4), (7, 1, 2)])
def test_schedule_counts_follow_the_formulas(b, k, epochs):
    s = {c: bk.step_schedule(b, k, epochs, c) for c in bk.COUNTERS}
    assert s["sync_at_epoch_end"].steps == math.ceil(b / k) * epochs
    assert s["sync_at_epoch_end"].steps == bk.scheduler_total_steps(b, k, epochs)
    assert s["global"].steps == b * epochs // k
    for sched in s.values():  # every micro-step is in exactly one window or left over
        seen = sorted([g for w in sched.windows for g in w] + list(sched.leftover))
        assert seen == list(range(b * epochs))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"batches_per_epoch": 0}, "batches_per_epoch.*0"),
        ({"accumulation_steps": -1}, "accumulation_steps.*-1"),
        ({"epochs": 1.5}, "epochs.*1.5"),
        ({"counter": "epoch"}, "counter.*'epoch'"),
    ],
)
def test_step_schedule_rejects(kwargs, match):
    args = {"batches_per_epoch": 10, "accumulation_steps": 2, "epochs": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        bk.step_schedule(**args)


def test_schedule_position_rejects():
    s = bk.step_schedule(5, 2, 1)
    with pytest.raises(ValueError, match=r"steps_done must be in \[0, 3\], got 4"):
        s.position_after(4)
    with pytest.raises(ValueError, match="steps_done must be an integer, got '1'"):
        s.position_after("1")


def test_scheduler_total_steps_rejects():
    with pytest.raises(ValueError, match="epochs.*0"):
        bk.scheduler_total_steps(10, 2, 0)


def test_position_rules():
    # ⌈b / k⌉ steps per epoch: k leaving a remainder (103, 4), dividing the epoch (100, 4; 7, 1),
    # and larger than it (3, 5)
    for b, k in ((103, 4), (100, 4), (7, 1), (3, 5)):
        s = bk.step_schedule(b, k, 3)
        for step in range(s.steps + 1):
            assert bk.position_from_step(step, b, k, "trainer") == s.position_after(step), (b, k)
    assert bk.position_from_step(38, 103, 4, "step_times_k") == 152
    assert bk.position_from_step(38, 103, 4, "forgets_k") == 103 + 12
    with pytest.raises(ValueError, match="rule.*'steps'"):
        bk.position_from_step(1, 10, 2, "steps")
    with pytest.raises(ValueError, match="step must be a non-negative integer, got -1"):
        bk.position_from_step(-1, 10, 2)


def test_warmup_lrs():
    lrs = bk.warmup_lrs(10, 4, 10)
    assert lrs[:4] == [0.25, 0.5, 0.75, 1.0] and lrs[4] == 1.0 and abs(lrs[-1] - 1 / 6) < 1e-15
    assert bk.linear_warmup(10, 4)(12) == 0.0  # past the end: 0, never negative
    assert bk.warmup_lrs(10, 0, 3) == [1.0, 0.9, 0.8]
    with pytest.raises(ValueError, match=r"warmup_steps must be in \[0, 10\), got 10"):
        bk.warmup_lrs(10, 10, 3)
    with pytest.raises(ValueError, match="warmup_steps must be an integer, got 2.5"):
        bk.warmup_lrs(10, 2.5, 3)
    with pytest.raises(ValueError, match="steps_taken.*0"):
        bk.warmup_lrs(10, 2, 0)


# --- loop.py and checkpoints.py ---------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("accumulation_steps", 0),
        ("micro_batch_size", 1.0),
        ("counter", "epochs"),
        ("last_window", "drop"),
        ("optimizer", "lion"),
        ("lr", -0.1),
        ("warmup_ratio", 1.0),
        ("dropout", 1.0),
        ("dropout", "0.1"),
        ("seed", -1),
    ],
)
def test_setup_rejects(field, value):
    with pytest.raises(ValueError, match=f"{field}.*{re.escape(repr(value))}"):
        bk.Setup(**{field: value})


@pytest.mark.parametrize("counter", bk.COUNTERS)
def test_resume_is_bit_exact_anywhere(counter):
    setup = dataclasses.replace(SMALL, counter=counter)
    ref = bk.train(setup)
    assert ref.steps == setup.schedule().steps and len(ref.trajectory) == ref.steps
    for stop in (1, 4, 11, 13, 21):  # inside windows, at window ends, at the epoch boundary
        first = bk.train(setup, stop_at=stop)
        rest = bk.resume(first.checkpoint)
        assert bk.final_error(rest, ref) == (True, 0.0), (counter, stop)
        assert first.logs["window"] + rest.logs["window"] == ref.logs["window"]
        assert bk.read_counts([first, rest], setup.samples, setup.epochs) == (0, 0)


def test_kept_checkpoints_equal_interrupted_ones():
    ref = bk.train(SMALL, keep_checkpoints=True)
    assert sorted(ref.checkpoints) == list(range(1, SMALL.schedule().micro_steps))
    for stop in (1, 5, 11, 21):
        assert _same(ref.checkpoints[stop], bk.train(SMALL, stop_at=stop).checkpoint)


def test_resume_leaves_the_checkpoint_untouched():
    ckpt = bk.train(SMALL, stop_at=5).checkpoint
    saved = bk.train(SMALL, stop_at=5).checkpoint
    first, second = bk.resume(ckpt), bk.resume(ckpt)  # AdamW would otherwise step ckpt's tensors
    assert _same(ckpt, saved) and bk.final_error(first, second) == (True, 0.0)
    assert bk.load_aliasing() == {"shares_tensors": True, "step_before": 1.0, "step_after": 2.0}


def test_checkpoint_files(tmp_path):
    first = bk.train(SMALL, stop_at=7)
    path = bk.save_checkpoint(first.checkpoint, tmp_path / "c.pt")
    loaded = bk.load_checkpoint(path)
    assert _same(loaded, first.checkpoint)
    assert bk.final_error(bk.resume(loaded), bk.train(SMALL))[0]
    with pytest.raises(ValueError, match="path='.*nope.pt': no such file"):
        bk.load_checkpoint(tmp_path / "nope.pt")
    with pytest.raises(ValueError, match="checkpoint is missing grads"):
        bk.save_checkpoint({k: v for k, v in first.checkpoint.items() if k != "grads"}, path)
    with pytest.raises(ValueError, match="checkpoint must be a dict, got list"):
        bk.resume([])


def test_train_and_resume_reject_bad_input():
    with pytest.raises(
        ValueError, match=r"stop_at must be a number of micro-batches in \[1, 21\], got 22"
    ):
        bk.train(SMALL, stop_at=22)
    with pytest.raises(ValueError, match="stop_at.*got 0"):
        bk.train(SMALL, stop_at=0)
    with pytest.raises(ValueError, match="setup must be an al.bookkeeping.Setup, got dict"):
        bk.train({})
    ckpt = bk.train(SMALL, stop_at=5).checkpoint
    with pytest.raises(ValueError, match="omit must be one of.*got 'grads'"):
        bk.resume(ckpt, omit="grads")
    with pytest.raises(ValueError, match="setup must be an al.bookkeeping.Setup, got int"):
        bk.resume(ckpt, setup=3)
    odd = dataclasses.replace(SMALL, micro_batch_size=3, batches_per_epoch=15)
    with pytest.raises(
        ValueError,
        match="20 samples, not a whole number of micro-batches of the setup's micro_batch_size=3",
    ):
        bk.resume(ckpt, setup=odd)


def test_the_sampler_state_matters_only_after_the_first_epoch():
    setup = dataclasses.replace(SMALL, batches_per_epoch=23)
    # lesson 10's explorer: stopped in epoch 1, the order redrawn from the seed is the true one
    first = {c.omission: c for c in bk.resume_damage(setup, stop_at=10)}
    later = {c.omission: c for c in bk.resume_damage(setup, stop_at=28)}
    assert first["sampler RNG"].bit_exact and first["sampler RNG"].extra_reads == 0
    assert not later["sampler RNG"].bit_exact


def test_every_omission_is_measured():
    setup = dataclasses.replace(SMALL, batches_per_epoch=23)  # windows of 3, last of 2
    checks = bk.resume_damage(setup, stop_at=28)  # epoch 2, 2 micro-batches into a window
    damage = {c.omission: c for c in checks}
    assert [c.omission for c in checks] == list(bk.OMISSIONS)
    assert damage["none"].bit_exact and damage["none"].rel_error == 0.0
    assert all(not c.bit_exact and c.rel_error > 1e-6 for c in checks[1:])
    assert damage["position forgets × k"].extra_reads > 0
    assert damage["sampler RNG"].extra_reads > 0  # the epoch reshuffled: some samples read twice
    # the dropout masks alone: every sample read once, the weights still move
    assert damage["dropout RNG"].extra_reads == 0 and not damage["dropout RNG"].bit_exact
    assert damage["a different k"].steps < damage["none"].steps
    rewind, trainer = damage["rewind, interruption's RNG"], damage["position by Trainer's rule"]
    # sync_at_epoch_end: ⌈23 / 3⌉ steps per epoch, so the Trainer's rule lands on the window start
    assert (rewind.rel_error, rewind.steps, rewind.extra_reads) == (
        trainer.rel_error,
        trainer.steps,
        trainer.extra_reads,
    )
    assert rewind.extra_reads == 2 * setup.micro_batch_size  # the window's 2 micro-batches again


@pytest.mark.parametrize("counter", bk.COUNTERS)
def test_rewind_is_exact_without_dropout_for_every_counter_and_interruption(counter):
    """Rewinding goes back to where the window began, also when that is in the previous epoch
    (global, per_epoch): exact for every interruption once nothing is random."""
    quiet = bk.Setup(batches_per_epoch=7, epochs=3, accumulation_steps=3, counter=counter)
    quiet = dataclasses.replace(quiet, dropout=0.0)
    ref = bk.train(quiet, keep_checkpoints=True)
    schedule = quiet.schedule()
    crossing = 0
    for stop in range(1, schedule.micro_steps):
        ckpt = ref.checkpoints[stop]
        start = schedule.position_after(ckpt["step"])
        crossing += start // 7 != stop // 7
        rest = bk.resume(ckpt, omit="rewind, interruption's RNG")
        assert bk.final_error(rest, ref)[0], (counter, stop)
    assert crossing > 0 or counter == "sync_at_epoch_end"  # windows that began an epoch earlier
    # the Trainer's rule counts ⌈7 / 3⌉ = 3 steps per epoch: wrong for the other two counters
    trainer = [
        bk.final_error(bk.resume(ref.checkpoints[s], omit="position by Trainer's rule"), ref)[0]
        for s in range(1, schedule.micro_steps)
    ]
    assert all(trainer) == (counter == "sync_at_epoch_end")


def test_rewind_is_exact_without_dropout_and_at_boundaries():
    quiet = dataclasses.replace(SMALL, dropout=0.0)
    ref = bk.train(quiet)
    rest = bk.resume(bk.train(quiet, stop_at=13).checkpoint, omit="rewind, interruption's RNG")
    assert bk.final_error(rest, ref)[0]
    noisy = bk.train(SMALL)
    boundary = bk.train(SMALL, stop_at=14).checkpoint  # right after the first window of epoch 2
    assert boundary["grads"] == {}
    assert bk.final_error(bk.resume(boundary, omit="partial window's .grad"), noisy)[0]


def test_rewind_under_dropout_is_exact_with_the_window_starts_rng():
    # lesson 10: rewinding replays the window's dropout only from the RNG state of its start
    ref = bk.train(SMALL, keep_checkpoints=True)
    schedule = SMALL.schedule()
    for stop in (12, 13, 16, 21):  # 1 or 2 micro-batches into a window of epoch 2
        ckpt = ref.checkpoints[stop]
        start = schedule.position_after(ckpt["step"])
        assert start < stop
        window_rng = {**ckpt, "torch_rng": ref.checkpoints[start]["torch_rng"]}
        for given, exact in ((ckpt, False), (window_rng, True)):
            rest = bk.resume(given, omit="rewind, interruption's RNG")
            assert bk.final_error(rest, ref)[0] == exact, (stop, exact)


def test_read_counts_by_hand():
    run = bk.Run(SMALL, 0, 0, consumed=[torch.tensor([0, 1]), torch.tensor([1, 3])])
    assert bk.read_counts([run], 4, 1) == (1, 1)  # 1 read twice, 2 never


# --- logs.py --------------------------------------------------------------------------------


def test_logging_runs_and_curves():
    traces = bk.logging_runs(ks=(1, 2, 8), window_samples=16, steps=3)
    curves = {k: bk.logged_curves(t) for k, t in traces.items()}
    assert set(curves[2]) == set(bk.LOGGED)
    for k, c in curves.items():
        assert al.grad_diff(traces[k].params[-1], traces[1].params[-1]).max_rel <= 1e-12
        for a, b in zip(c["sum_of_unscaled"], c["window"]):
            assert abs(a - k * b) <= 1e-12 * k * b
        for a, b in zip(c["window"], curves[1]["window"]):
            assert abs(a - b) <= 1e-12 * b
    assert bk.micro_step_axis(3, 8) == [8, 16, 24]


def test_logging_bad_input():
    with pytest.raises(ValueError, match="k must divide window_samples=16, got 3"):
        bk.logging_runs(ks=(3,), window_samples=16)
    with pytest.raises(ValueError, match="ks must not be empty"):
        bk.logging_runs(ks=())
    with pytest.raises(ValueError, match="k must be an integer >= 1, got 0"):
        bk.micro_step_axis(3, 0)
    with pytest.raises(ValueError, match="trace must be an accumlab.Trace, got dict"):
        bk.logged_curves({})
    with pytest.raises(ValueError, match="lr must be a finite number > 0, got 0"):
        bk.logging_runs(lr=0)


def test_mixed_axis_log():
    s = bk.step_schedule(5, 2, 1)  # micro-steps 0-4, steps after 1, 3, 4
    assert bk.mixed_axis_log(s) == {"loss": (5, 0), "lr": (0, 3)}
    assert bk.mixed_axis_log(bk.step_schedule(5, 1, 1)) == {"loss": (5, 0), "lr": (5, 0)}
    assert bk.mixed_axis_log(s, "optimizer_step") == {"loss": (3, 0), "lr": (3, 0)}
    with pytest.raises(ValueError, match="loss_axis must be one of.*got 'epoch'"):
        bk.mixed_axis_log(s, "epoch")
    with pytest.raises(ValueError, match="schedule must be a Schedule, got list"):
        bk.mixed_axis_log([])


# --- tokens.py ------------------------------------------------------------------------------


def test_tokens_per_step_by_hand():
    budget = bk.tokens_per_step([3, 1, 2, 4, 5], 2, 1, ranks=2)  # steps of 4 sequences
    assert budget.samples == [4, 1] and budget.real == [10, 5]
    assert budget.padded == [2 * 3 + 2 * 4, 5] and budget.steps == 2
    assert bk.tokens_per_step(torch.tensor([2, 2]), 1, 2).real == [4]
    for bad, match in [
        ([], "lengths must not be empty"),
        ([1, -2], r"lengths\[1\] must be a non-negative integer, got -2"),
        ("12", "lengths must be a list or tuple, got str '12'"),
    ]:
        with pytest.raises(ValueError, match=match):
            bk.tokens_per_step(bad, 1, 1)
    with pytest.raises(ValueError, match="ranks.*0"):
        bk.tokens_per_step([1, 2], 1, 1, ranks=0)


# --- plots.py and explorer.py ---------------------------------------------------------------


def test_plots_return_figures():
    traces = bk.logging_runs(ks=(1, 2), window_samples=4, steps=2)
    curves = {k: bk.logged_curves(t) for k, t in traces.items()}
    schedules = {c: bk.step_schedule(7, 2, 2, c) for c in bk.COUNTERS}
    runs = {"small": bk.train(SMALL)}
    checks = [bk.ResumeCheck("none", True, 0.0, 8, 0, 0), bk.ResumeCheck("x", False, 0.1, 8, 1, 1)]
    figures = [
        bk.plot_logged_losses(curves),
        bk.plot_schedules(schedules),
        bk.plot_log_ratio(runs),
        bk.plot_lr_schedules({"a": [0.5, 1.0]}),
        bk.plot_resume_damage(checks),
        bk.plot_tokens_per_step(bk.tokens_per_step([1, 2, 3], 1, 2)),
        bk.plot_bookkeeping_explorer(bk.bookkeeping_data()),
    ]
    assert all(isinstance(f, Figure) for f in figures)
    assert len(figures[0].axes) == 6 and len(figures[1].axes) == 3


def test_explorer_figure_updates_in_place():
    fig = bk.plot_bookkeeping_explorer(bk.bookkeeping_data(k=4))
    line = fig.axes[0].lines[0]
    assert max(line.get_ydata()) == 4
    bk.update_bookkeeping_explorer(fig, bk.bookkeeping_data(k=2, counter="global", stop_at=40))
    assert fig.axes[0].lines[0] is line and set(line.get_ydata()) == {2}  # same artist, new data


def test_bookkeeping_data():
    d = bk.bookkeeping_data(4, 3, "sync_at_epoch_end", 47, "none", batches_per_epoch=31)
    assert d["bit_exact"] and d["stop_step"] == 12 and d["steps"] == 24  # 8 steps per epoch
    assert all(e == 0.0 for e in d["errors"]) and d["error_steps"][0] == 13
    lost = bk.bookkeeping_data(4, 3, "sync_at_epoch_end", 33, "partial window's .grad")
    assert lost["schedule"].batches_per_epoch == 23 and lost["stop_step"] == 8
    assert not lost["bit_exact"] and lost["errors"][0] > 0
    assert "bit for bit" in bk.explorer_summary(d) and "off by" in bk.explorer_summary(lost)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"k": 17}, "k must be at most 16, got 17"),
        ({"k": 0}, "k must be an integer >= 1, got 0"),
        ({"epochs": 5}, "epochs must be at most 4, got 5"),
        ({"counter": "x"}, "counter must be one of.*got 'x'"),
        ({"stop_at": 69}, r"stop_at must be a number of micro-batches in \[1, 68\], got 69"),
        ({"batches_per_epoch": 32}, "batches_per_epoch must be at most 31, got 32"),
        ({"batches_per_epoch": 1}, "batches_per_epoch must be an integer >= 2, got 1"),
        ({"stop_at": True}, "stop_at.*True"),
        ({"omission": "all"}, "omission must be one of.*got 'all'"),
    ],
)
def test_bookkeeping_data_rejects(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bk.bookkeeping_data(**kwargs)


def test_explorer_controls():
    ex = bk.bookkeeping_explorer()
    assert ex.data["bit_exact"] and "bit for bit" in ex.summary.value
    ex.controls["omission"].value = "optimizer state"
    assert not ex.data["bit_exact"] and "optimizer state" in ex.summary.value
    ex.controls["epochs"].value = 1  # the interruption slider follows: 33 is past the end
    assert ex.controls["stop_at"].max == 22 and ex.controls["stop_at"].value <= 22
    assert ex.error is None and ex.data["schedule"].epochs == 1
    ex.controls["batches_per_epoch"].value = 31
    assert ex.controls["stop_at"].max == 30 and ex.data["schedule"].batches_per_epoch == 31
    ex.controls["k"].value = 16
    ex.controls["counter"].value = "per_epoch"
    assert ex.data["schedule"].leftover and ex.error is None


@pytest.mark.parametrize(
    "moves",
    [
        # an epoch shorter than k under the per-epoch counter: (i + 1) % k is never 0
        {"batches_per_epoch": 2, "k": 3, "counter": "per_epoch"},
        # a whole run shorter than k under the global counter
        {"k": 16, "batches_per_epoch": 10, "epochs": 1, "counter": "global"},
    ],
)
def test_explorer_draws_a_run_that_never_steps(moves):
    ex = bk.bookkeeping_explorer()
    for name, value in moves.items():
        ex.controls[name].value = value
    assert ex.error is None and ex.data["schedule"].steps == 0
    assert "0 optimizer steps: the loop never steps" in ex.summary.value
    ex.controls["batches_per_epoch"].value = 23  # and the explorer goes on from there
    assert ex.error is None and ex.data["schedule"].batches_per_epoch == 23


def test_explorer_says_what_the_partial_window_holds():
    # 33 = 8 windows of 4 + 1 under the global counter; 32 ends a window
    for stop, held in ((33, 1), (32, 0)):
        d = bk.bookkeeping_data(counter="global", stop_at=stop, omission="partial window's .grad")
        assert d["in_window"] == held and d["bit_exact"] == (held == 0)
        said = f"{held} micro-batch(es) in .grad{' (lost)' if held else ''}"
        assert said in bk.explorer_summary(d)
    fig = bk.plot_bookkeeping_explorer(bk.bookkeeping_data())
    exact = next(line for line in fig.axes[2].lines if line.get_gid() == "exact")
    assert len(exact.get_xdata()) > 0  # a bit-exact resume is drawn green, not as a red error


# --- the real frameworks count the same steps -------------------------------------------------

B, K, EPOCHS = 103, 4, 3


def _ends(counter: str) -> list[int]:
    return [w[-1] for w in bk.step_schedule(B, K, EPOCHS, counter).windows]


@pytest.mark.slow
@pytest.mark.parametrize("sync, counter", [(True, "sync_at_epoch_end"), (False, "global")])
def test_accelerate_sync_with_dataloader(sync, counter):
    accelerate = pytest.importorskip("accelerate")
    from accelerate.utils import GradientAccumulationPlugin

    plugin = GradientAccumulationPlugin(num_steps=K, sync_with_dataloader=sync)
    acc = accelerate.Accelerator(cpu=True, gradient_accumulation_plugin=plugin)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.ones(B, 1))
    model, opt, loader = acc.prepare(model, opt, torch.utils.data.DataLoader(data, batch_size=1))
    stepped, g = [], 0
    opt.optimizer.register_step_post_hook(lambda *_: stepped.append(g))
    for _ in range(EPOCHS):
        for (x,) in loader:
            with acc.accumulate(model):
                acc.backward(model(x).sum())
                opt.step()
                opt.zero_grad()
            g += 1
    acc.free_memory()
    assert stepped == _ends(counter)


@pytest.mark.slow
def test_accelerate_steps_a_prepared_scheduler_once_per_optimizer_step():
    # the docstring says lengths "should not be changed" for accumulation; the learning rate
    # still moves only when the gradients sync: 16 micro-batches at k = 4 are 4 scheduler steps
    accelerate = pytest.importorskip("accelerate")
    acc = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=4)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
    data = torch.utils.data.TensorDataset(torch.ones(16, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=1)
    model, opt, sched, loader = acc.prepare(model, opt, sched, loader)
    for (x,) in loader:
        with acc.accumulate(model):
            acc.backward(model(x).sum())
            opt.step()
            sched.step()
            opt.zero_grad()
    acc.free_memory()
    assert sched.scheduler.last_epoch == 16 // 4


@pytest.mark.slow
def test_accelerate_steps_a_prepared_scheduler_per_rank_per_sync(monkeypatch):
    """Lesson 10, cell 19: the prepared scheduler steps `num_processes` times per sync, and each
    rank syncs once per k of its own ceil(N / P) batches plus once at the epoch's end, so an epoch
    is P * ceil(ceil(N / P) / k) steps: ceil(N / k) only when k divides each rank's share. One
    process stands in for rank 0 of 4: the scheduler reads the world size from the shared state."""
    accelerate = pytest.importorskip("accelerate")
    from accelerate.state import AcceleratorState, PartialState

    n, ranks, k = 103, 4, 4
    acc = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=k)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
    per_rank = -(-n // ranks)  # even_batches=True: every rank reads ceil(N / P) batches
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(per_rank, 1)))
    model, opt, sched, loader = acc.prepare(model, opt, sched, loader)
    monkeypatch.setitem(PartialState._shared_state, "num_processes", ranks)
    monkeypatch.setitem(AcceleratorState._shared_state, "num_processes", ranks)
    assert AcceleratorState().num_processes == ranks
    for (x,) in loader:
        with acc.accumulate(model):
            acc.backward(model(x).sum())
            opt.step()
            sched.step()
            opt.zero_grad()
    acc.free_memory()
    assert sched.scheduler.last_epoch == ranks * math.ceil(per_rank / k) == 28
    assert sched.scheduler.last_epoch > math.ceil(n / k) == 26


@pytest.mark.slow
# (3, 4, 2): an epoch shorter than k — Lightning steps once per epoch, on its last batch
@pytest.mark.parametrize("batches, k, epochs", [(B, K, EPOCHS), (3, 4, 2)])
def test_lightning_accumulate_grad_batches(batches, k, epochs):
    L = pytest.importorskip("lightning")

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(1, 1)
            self.seen, self.stepped = 0, []

        def training_step(self, batch, batch_idx):
            self.current = self.seen
            self.seen += 1
            return self.lin(batch[0]).sum()

        def on_before_optimizer_step(self, optimizer):
            self.stepped.append(self.current)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

        def train_dataloader(self):
            data = torch.utils.data.TensorDataset(torch.ones(batches, 1))
            return torch.utils.data.DataLoader(data, batch_size=1)

    module = Module()
    trainer = L.Trainer(
        max_epochs=epochs,
        accumulate_grad_batches=k,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module)
    ends = [w[-1] for w in bk.step_schedule(batches, k, epochs, "sync_at_epoch_end").windows]
    assert module.stepped == ends
    assert (
        trainer.global_step
        == trainer.estimated_stepping_batches
        == bk.scheduler_total_steps(batches, k, epochs)
    )


@pytest.mark.slow
def test_transformers_trainer_steps_and_resumes_where_the_lesson_says(tmp_path):
    transformers = pytest.importorskip("transformers")
    transformers.utils.logging.set_verbosity_error()
    from torch.optim.optimizer import register_optimizer_step_post_hook

    class Indexed(torch.utils.data.Dataset):
        def __len__(self):
            return B

        def __getitem__(self, i):
            return {"x": torch.tensor([float(i)]), "idx": torch.tensor(i)}

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(1, 1)
            self.seen = []

        def forward(self, x, idx):
            self.seen.append(int(idx))  # which sample each micro-step reads
            return {"loss": (self.lin(x / 100.0) ** 2).mean()}

    def train(out, resume=None):
        torch.manual_seed(0)
        net = Net()
        net.steps = []  # micro-batches read when each optimizer step ran
        args = transformers.TrainingArguments(
            str(out),
            per_device_train_batch_size=1,
            gradient_accumulation_steps=K,
            num_train_epochs=EPOCHS,
            save_strategy="steps",
            save_steps=38,
            logging_strategy="no",
            report_to=[],
            use_cpu=True,
            remove_unused_columns=False,
            seed=0,
            disable_tqdm=True,
        )
        trainer = transformers.Trainer(model=net, args=args, train_dataset=Indexed())
        hook = register_optimizer_step_post_hook(lambda *_: net.steps.append(len(net.seen)))
        try:
            trainer.train(resume_from_checkpoint=resume)
        finally:
            hook.remove()
        return trainer, net

    trainer, full = train(tmp_path / "full")
    assert (
        trainer.state.global_step
        == trainer.state.max_steps
        == bk.scheduler_total_steps(B, K, EPOCHS)
    )
    # each optimizer step after exactly the micro-batches the sync_at_epoch_end schedule says
    schedule = bk.step_schedule(B, K, EPOCHS, "sync_at_epoch_end")
    ends = [w[-1] + 1 for w in schedule.windows]
    assert full.steps == ends
    _, resumed = train(tmp_path / "again", resume=str(tmp_path / "full" / "checkpoint-38"))
    start = bk.position_from_step(38, B, K, "trainer")
    assert start == 151 and resumed.seen == full.seen[start:]
    assert resumed.steps == [end - start for end in ends[38:]]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["random", "group_by_length"])
def test_a_trainer_resume_reads_the_same_order_unless_grouped_by_length(tmp_path, strategy):
    """Lesson 10, cell 46: the seedable sampler seeds each epoch's shuffle; `group_by_length`'s
    LengthGroupedSampler has no generator and draws its order from the global RNG at `iter`, so a
    resume mid-epoch reads another order of the epoch and re-reads some of its samples."""
    transformers = pytest.importorskip("transformers")
    B, K, EPOCHS = 103, 4, 3

    class Sized(torch.utils.data.Dataset):
        def __len__(self):
            return B

        def __getitem__(self, i):
            if i >= B:
                raise IndexError(i)
            length = 1 + (i * 37) % 11  # lengths for group_by_length to sort by
            return {"input_ids": torch.zeros(length), "x": torch.tensor([float(i)]), "idx": i}

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(1, 1)
            self.seen = []

        def forward(self, input_ids, x, idx):
            self.seen.append(int(idx))
            return {"loss": (self.lin(x / 100.0) ** 2).mean()}

    def train(out, resume=None):
        torch.manual_seed(0)
        net = Net()
        args = transformers.TrainingArguments(
            str(out),
            per_device_train_batch_size=1,
            gradient_accumulation_steps=K,
            num_train_epochs=EPOCHS,
            save_strategy="steps",
            save_steps=38,
            logging_strategy="no",
            report_to=[],
            use_cpu=True,
            remove_unused_columns=False,
            seed=0,
            disable_tqdm=True,
            train_sampling_strategy=strategy,
        )
        transformers.Trainer(model=net, args=args, train_dataset=Sized()).train(
            resume_from_checkpoint=resume
        )
        return net

    full = train(tmp_path / "full")
    resumed = train(tmp_path / "again", resume=str(tmp_path / "full" / "checkpoint-38"))
    start = bk.position_from_step(38, B, K, "trainer")  # 151: 48 micro-batches into epoch 2
    read_before = set(full.seen[B:start])
    reread = read_before & set(resumed.seen[: 2 * B - start])
    if strategy == "random":
        assert resumed.seen == full.seen[start:] and not reread
    else:
        assert resumed.seen != full.seen[start:] and reread


# practice.py, and the checks lesson 10 relies on ----------------------------------------------


def test_accelerate_syncs_at_epoch_end_only_for_a_prepared_loader():
    prepared = bk.accelerate_sync_points(7, 4, 2, prepared=True)
    unprepared = bk.accelerate_sync_points(7, 4, 2, prepared=False)
    assert prepared == [w[-1] for w in bk.step_schedule(7, 4, 2, "sync_at_epoch_end").windows]
    assert unprepared == [w[-1] for w in bk.step_schedule(7, 4, 2, "global").windows]
    assert prepared == [3, 6, 10, 13] and unprepared == [3, 7, 11]


def test_a_stock_loop_resumes_exactly_only_with_the_epochs_rng_then_the_checkpoints():
    results = {r: bk.stock_loader_resume(r) for r in bk.RNG_RESTORES}
    assert results["epoch_then_ckpt"]["bit_exact"]
    assert results["epoch_then_ckpt"]["extra_reads"] == 0
    for restore in ("none", "at_checkpoint"):
        r = results[restore]
        # another order for the rest of the epoch: samples read twice, the weights elsewhere
        assert not r["bit_exact"] and r["extra_reads"] > 0 and r["rel_error"] > 1e-3
    # the caller's global RNG is left alone
    torch.manual_seed(3)
    before = torch.get_rng_state()
    bk.stock_loader_resume("none")
    assert torch.equal(torch.get_rng_state(), before)


def test_dropout_masks_split_alike_is_a_property_of_the_generator_and_the_model():
    # this CPU build draws element by element (lesson 10 prints the CPU and asserts both ways)
    assert bk.dropout_masks_split_alike(4, 2, p=0.1)
    assert bk.dropout_masks_split_alike(8, 4, features=3, p=0.5, seed=2)
    # two dropout layers per forward: the draws interleave, whatever the kernel
    assert not bk.dropout_masks_split_alike(4, 2, p=0.1, layers=2)
    assert bk.dropout_masks_split_alike(4, 1, p=0.1, layers=3)  # one part: the same draws


@pytest.mark.parametrize("depth", [1, 2])
def test_halving_the_micro_batch_keeps_the_masks_exactly_when_they_split_alike(depth):
    setup = bk.Setup(batches_per_epoch=9, epochs=2, accumulation_steps=3, depth=depth)
    reference = bk.train(setup)
    halved = dataclasses.replace(
        setup, micro_batch_size=2, batches_per_epoch=18, accumulation_steps=6
    )
    rest = bk.resume(bk.train(setup, stop_at=10).checkpoint, setup=halved)
    split = bk.dropout_masks_split_alike(4, 2, p=setup.dropout, layers=depth)
    assert (bk.final_error(rest, reference)[1] < 1e-12) == split
    assert split == (depth == 1)  # on this CPU build: element by element


def test_cpu_description_names_what_torch_uses():
    text = bk.cpu_description()
    assert torch.__version__ in text and torch.backends.cpu.get_cpu_capability() in text


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_when_a_stock_loader_draws_its_shuffle_from_the_global_rng(workers):
    """Lesson 10: without workers RandomSampler draws its seed at the first batch; with workers
    the first batches are prefetched inside iter(loader), so the seed is drawn there."""
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(
        TensorDataset(torch.arange(64)), batch_size=4, shuffle=True, num_workers=workers
    )

    def first_batch(reseed_after_iter):
        torch.manual_seed(0)
        it = iter(loader)
        if reseed_after_iter:
            torch.manual_seed(1)
        return next(it)[0]

    same = torch.equal(first_batch(False), first_batch(True))
    assert same == (workers > 0)


@pytest.mark.slow
@pytest.mark.parametrize("persistent", [False, True])
def test_persistent_workers_draw_the_base_seed_once(persistent):
    """Lesson 10: a later epoch's iter(loader) draws two seeds from the global RNG (base seed and
    shuffle), one with persistent_workers=True (the iterator and its base seed are kept)."""
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(
        TensorDataset(torch.arange(16)),
        batch_size=4,
        shuffle=True,
        num_workers=2,
        persistent_workers=persistent,
    )
    for _ in loader:  # the first epoch
        pass

    def after(draws):
        torch.manual_seed(0)
        for _ in range(draws):
            torch.empty((), dtype=torch.int64).random_()
        return torch.get_rng_state()

    torch.manual_seed(0)
    it = iter(loader)
    state = torch.get_rng_state()
    del it
    assert torch.equal(state, after(1 if persistent else 2))


def test_the_loops_log_numbers_are_python_floats_read_once_per_step():
    run = bk.train(SMALL)
    assert all(type(v) is float for key in run.logs for v in run.logs[key])
    ckpt = bk.train(SMALL, stop_at=5).checkpoint
    assert all(not isinstance(v, torch.Tensor) for v in ckpt["window"].values())


def test_resuming_twice_from_one_dict_without_a_copy_gives_two_runs():
    setup = bk.Setup(batches_per_epoch=9, epochs=2)
    run = bk.train(setup, stop_at=5)
    reference = bk.train(setup)
    first = bk.resume(run.checkpoint, copy_first=False)
    second = bk.resume(run.checkpoint, copy_first=False)
    assert bk.final_error(first, reference)[0]
    assert not bk.final_error(second, first)[0]
    # with the copy (the default) the dict is untouched and both resumes are exact
    run = bk.train(setup, stop_at=5)
    assert all(bk.final_error(bk.resume(run.checkpoint), reference)[0] for _ in range(2))


def test_checkpoints_with_nan_values_and_references_of_another_setup_are_refused():
    setup = bk.Setup(batches_per_epoch=5, epochs=2, accumulation_steps=2)
    ckpt = bk.train(setup, stop_at=3).checkpoint
    name = next(iter(ckpt["model"]))
    ckpt["model"][name] = ckpt["model"][name] * float("nan")
    with pytest.raises(ValueError, match=r"checkpoint\['model'\].*nan"):
        bk.resume(ckpt)
    other = bk.train(bk.Setup(batches_per_epoch=5, epochs=2, accumulation_steps=4))
    with pytest.raises(
        ValueError, match="reference must be the uninterrupted run of the same setup"
    ):
        bk.resume_damage(setup, 3, reference=other)


def test_counts_accept_numpy_integers_and_0d_tensors():
    import numpy as np

    assert bk.position_from_step(np.int64(3), 10, 4) == bk.position_from_step(3, 10, 4)
    assert bk.step_schedule(10, 4).position_after(torch.tensor(2)) == 8
    assert bk.scheduler_total_steps(np.int64(103), np.int64(4), torch.tensor(3)) == 78
    setup = bk.Setup(batches_per_epoch=5, epochs=2, accumulation_steps=2)
    assert bk.train(setup, stop_at=np.int64(3)).checkpoint["micro_step"] == 3
    assert bk.tokens_per_step(np.array([3, 4, 5]), 2, 1).real == [7, 5]


def test_exercise_10_2_tells_the_step_counting_mistakes_apart():
    # k = 16, 4 epochs: ⌈250 / 16⌉ steps per epoch (17, 33, 49); the carried window counted as an
    # extra step (16, 32, 48); a counter over the whole run (16, 32, 47) — each its own hint
    ceil, extra, whole = (al.check("10.2", a) for a in ((17, 33, 49), (16, 32, 48), (16, 32, 47)))
    assert not (ceil.ok or extra.ok or whole.ok)
    assert len({ceil.message, extra.message, whole.message}) == 3
    assert "⌊250 / 16⌋" in ceil.message and "not an extra one" in extra.message
    assert "`global`" in whole.message
    assert al.check("10.2", (16, 31, 46)).ok


def test_exercise_10_2_counts_from_0_get_no_hint_that_hands_over_the_answer():
    # (15, 30, 45) is the schedule's 0-based output: a hint naming the off-by-one would hand over
    # the answer; it gets the hint any other miscount gets. The steps form a set: any order passes
    zero_based, other = al.check("10.2", (15, 30, 45)), al.check("10.2", (14, 29, 44))
    assert not zero_based.ok and zero_based.message == other.message
    assert "from 1" not in zero_based.message
    assert al.check("10.2", (46, 16, 31)).ok and al.check("10.2", {31, 16, 46}).ok


def test_exercise_10_1_refuses_one_more_step_per_epoch_when_k_divides_it():
    # ⌊250 / 8⌋ + 1 = ⌈250 / 8⌉, so only the second case (k = 8 divides 240) tells them apart
    assert al.check("10.1", (96, 90)).ok
    wrong = al.check("10.1", (96, 93))
    assert not wrong.ok and "when k divides the epoch" in wrong.message


def test_exercise_10_3_draws_unseen_cases_on_every_check():
    import random

    from accumlab.exercises import lesson10

    one, two = (lesson10._drawn_cases(random.Random(seed)) for seed in (1, 2))
    assert one != two
    for cases in (one, two):
        pairs = {(b, k) for _, b, k in cases}
        assert len(pairs) == lesson10._DRAWN and any(b > 1000 for b, _ in pairs)
        for step, b, k in cases:  # every drawn step exists in a run of at most _MAX_EPOCHS
            assert 0 <= step <= (b // k) * lesson10._MAX_EPOCHS
    # the checker's truth for the drawn cases agrees with the whole schedule where one is cheap
    for b, k in [(103, 4), (100, 4), (7, 2), (3, 5), (9, 1)]:
        s = bk.step_schedule(b, k, 4, "per_epoch")
        assert [lesson10._true_position(i, b, k) for i in range(s.steps + 1)] == [
            s.position_after(i) for i in range(s.steps + 1)
        ]


def test_skipped_fp16_steps_leave_the_step_count_ahead_of_the_schedule():
    counts = bk.skipped_step_counts(windows=6, k=2, overflow_in=(1,))
    assert counts["skipped"] == 1 and counts["global_step"] == 6
    assert counts["optimizer_steps"] == counts["scheduler_steps"] == 5
    assert abs(counts["last_lr_factor"] - 1 / 6) < 1e-12
    none = bk.skipped_step_counts(windows=6, k=2, overflow_in=())
    assert none["skipped"] == 0 and none["scheduler_steps"] == 6 and none["last_lr_factor"] == 0
    for kwargs, name in (
        ({"windows": 0}, "windows"),
        ({"k": 0}, "k"),
        ({"overflow_in": (6,)}, "overflow_in"),
    ):
        with pytest.raises(ValueError, match=name):
            bk.skipped_step_counts(**{"windows": 6, **kwargs})


@pytest.mark.slow
def test_the_trainer_counts_a_skipped_step_but_does_not_step_its_schedule(tmp_path, monkeypatch):
    """Lesson 10, cell 19: when the optimizer step was skipped (an fp16 overflow), the installed
    Trainer skips lr_scheduler.step() yet adds 1 to global_step, as skipped_step_counts models.
    The skip is faked through the flag the Trainer reads, so no fp16 device is needed."""
    transformers = pytest.importorskip("transformers")
    accelerate = pytest.importorskip("accelerate")
    windows, k, overflow_in = 12, 4, (3, 7)
    calls = []

    def skipped(self):
        calls.append(None)
        return len(calls) - 1 in overflow_in

    monkeypatch.setattr(accelerate.Accelerator, "optimizer_step_was_skipped", property(skipped))

    class Items(torch.utils.data.Dataset):
        def __len__(self):
            return windows * k

        def __getitem__(self, i):
            return {"x": torch.tensor([float(i)])}

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(1, 1)

        def forward(self, x):
            return {"loss": (self.lin(x / 100.0) ** 2).mean()}

    args = transformers.TrainingArguments(
        str(tmp_path),
        per_device_train_batch_size=1,
        gradient_accumulation_steps=k,
        num_train_epochs=1,
        lr_scheduler_type="linear",
        save_strategy="no",
        logging_strategy="no",
        report_to=[],
        use_cpu=True,
        remove_unused_columns=False,
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(model=Net(), args=args, train_dataset=Items())
    trainer.train()
    counts = al.bookkeeping.skipped_step_counts(windows=windows, k=k, overflow_in=overflow_in)
    assert len(calls) == windows  # the Trainer asked once per window
    assert trainer.state.global_step == counts["global_step"] == windows
    assert trainer.lr_scheduler.last_epoch == counts["scheduler_steps"] == windows - 2


@pytest.mark.slow
@pytest.mark.parametrize("noise", [False, True])
def test_trainer_rng_state_replays_dropout_only_without_collator_draws(tmp_path, noise):
    """Lesson 10, cell 46: the Trainer restores rng_state.pth after the first window's fetch, so a
    collator drawing from the global RNG (num_workers=0) shifts every dropout mask after a resume."""
    transformers = pytest.importorskip("transformers")
    transformers.utils.logging.set_verbosity_error()
    k, samples = 4, 24

    class Indexed(torch.utils.data.Dataset):
        def __len__(self):
            return samples

        def __getitem__(self, i):
            return {"x": torch.tensor([float(i)]), "idx": torch.tensor(i)}

    def collate(rows):
        x = torch.stack([r["x"] for r in rows])
        # an augmentation drawn in the main process from the global RNG
        x = x + torch.rand(x.shape) if noise else x
        return {"x": x, "idx": torch.stack([r["idx"] for r in rows])}

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.out, self.masks = torch.nn.Linear(1, 8), torch.nn.Linear(8, 1), []

        def forward(self, x, idx):
            h = self.lin(x / 100.0)
            mask = torch.nn.functional.dropout(torch.ones_like(h), 0.5, self.training) > 0
            self.masks.append(mask)
            return {"loss": (self.out(h * mask * 2) ** 2).mean()}

    def train(out, resume=None):
        torch.manual_seed(0)
        net = Net()
        args = transformers.TrainingArguments(
            str(out), per_device_train_batch_size=1, gradient_accumulation_steps=k,
            num_train_epochs=2, save_strategy="steps", save_steps=3, logging_strategy="no",
            report_to=[], use_cpu=True, remove_unused_columns=False, seed=0, disable_tqdm=True,
        )  # fmt: skip
        trainer = transformers.Trainer(
            model=net, args=args, train_dataset=Indexed(), data_collator=collate
        )
        trainer.train(resume_from_checkpoint=resume)
        return net

    full = train(tmp_path / "full")
    rest = train(tmp_path / "again", resume=tmp_path / "full" / "checkpoint-3")
    start = len(full.masks) - len(rest.masks)
    assert start == 3 * k  # resumed mid-epoch, after 3 optimizer steps
    equal = [torch.equal(a, b) for a, b in zip(full.masks[start:], rest.masks, strict=True)]
    exact = all(torch.equal(p, q) for p, q in zip(full.parameters(), rest.parameters()))
    assert (sum(equal), exact) == ((0, False) if noise else (len(equal), True)), (equal, exact)


@pytest.mark.slow
def test_accelerate_save_state_restores_the_accumulate_counter(tmp_path):
    """Lesson 10, cell 46: save_state keeps accelerator.step (micro-batches this epoch with
    sync_with_dataloader) and load_state restores it; the loader itself is not moved."""
    accelerate = pytest.importorskip("accelerate")
    acc = accelerate.Accelerator(gradient_accumulation_steps=K, cpu=True)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(7, 1)))
    model, opt, loader = acc.prepare(model, opt, loader)
    for read, (x,) in enumerate(loader, start=1):
        with acc.accumulate(model):
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
        if read == 6:
            break
    acc.save_state(tmp_path)
    again = accelerate.Accelerator(gradient_accumulation_steps=K, cpu=True)
    model2 = again.prepare(torch.nn.Linear(1, 1))
    again.prepare(torch.optim.SGD(model2.parameters(), lr=0.1))
    assert again.step == 0
    again.load_state(tmp_path)
    assert acc.step == again.step == 6, (acc.step, again.step)


@pytest.mark.slow
def test_lightning_hands_the_divided_loss_to_on_train_batch_end():
    """Lesson 10, cell 5 (#18464): outputs["loss"] in on_train_batch_end is the loss ÷ k."""
    L = pytest.importorskip("lightning")

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin, self.raw, self.out = torch.nn.Linear(1, 1), [], []

        def training_step(self, batch, i):
            loss = (self.lin(batch[0]) ** 2).mean()
            self.raw.append(loss.item())
            return loss

        def on_train_batch_end(self, outputs, batch, i):
            self.out.append(outputs["loss"].item())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    for k in (1, 4):
        torch.manual_seed(0)
        module = Module()
        data = torch.utils.data.TensorDataset(torch.ones(8, 1))
        L.Trainer(
            max_epochs=1, accumulate_grad_batches=k, logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
        ).fit(module, torch.utils.data.DataLoader(data))  # fmt: skip
        assert module.out == pytest.approx([r / k for r in module.raw], rel=1e-6), (k, module.out)


def test_window_samples_keep_the_global_batch_and_its_windows_across_world_sizes():
    """Lesson 10's world-size resume: with micro-batch × k × ranks kept, each window is one
    contiguous stretch of the epoch's shuffled order, whatever the ranks; a k left as it was
    (another global batch) or a micro-batch changed instead gives other windows."""
    from torch.utils.data import DistributedSampler

    order = list(DistributedSampler(range(60), num_replicas=1, rank=0, seed=3))
    for ranks, k in ((1, 6), (2, 3), (3, 2), (6, 1)):
        got = al.bookkeeping.window_samples(60, 2, k, ranks, seed=3)
        assert got["windows"] == [sorted(order[w * 12 : (w + 1) * 12]) for w in range(5)]
        assert got["dealt"] == 60
    kept_k = al.bookkeeping.window_samples(60, 2, 6, 2, seed=3)["windows"]
    assert kept_k[0] == sorted(order[:24])  # 24 samples a step: another run
    padded = al.bookkeeping.window_samples(10, 1, 1, 4)
    assert padded["dealt"] == 12 and len(padded["windows"]) == 3


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"samples": 0}, "samples.*0"),
        ({"micro_batch": 2.5}, "micro_batch.*2.5"),
        ({"k": -1}, "k.*-1"),
        ({"ranks": "2"}, "ranks.*'2'"),
        ({"seed": -1}, "seed.*-1"),
        ({"samples": 10**9}, "samples must be at most"),
    ],
)
def test_window_samples_rejects(kwargs, match):
    args = {"samples": 20, "micro_batch": 2, "k": 2, "ranks": 2} | kwargs
    with pytest.raises(ValueError, match=match):
        al.bookkeeping.window_samples(**args)


def test_window_grads_are_one_batchs_up_to_rounding_only_where_the_windows_are_the_same():
    for ranks in (1, 2, 5):
        g = al.bookkeeping.window_grads(60, 2, 10 // ranks, ranks, seed=1, window=2)
        assert float((g["ddp"] - g["one_batch"]).norm() / g["one_batch"].norm()) < 1e-12
    kept_k = al.bookkeeping.window_grads(60, 2, 5, 2, seed=1)["ddp"]  # 20 samples a step
    other = al.bookkeeping.window_grads(60, 2, 5, 1, seed=1)["one_batch"]  # 10 a step
    assert float((kept_k - other).norm() / other.norm()) > 1e-3
    with pytest.raises(ValueError, match="window must be at most 5, got 6"):
        al.bookkeeping.window_grads(60, 2, 5, 1, window=6)
