"""Lesson 10 (al.bookkeeping): bad inputs and what each must do."""

from __future__ import annotations

import numpy as np
import torch
from fuzz_harness import bad, handled
from matplotlib.figure import Figure

import accumlab as al

from . import NAN

B = al.bookkeeping
SMALL = {"batches_per_epoch": 5, "epochs": 2, "accumulation_steps": 2}


def _small(**kw):
    return B.Setup(**{**SMALL, **kw})


def _checkpoint():
    return B.train(_small(), stop_at=3).checkpoint


def _nan_weights():
    ckpt = _checkpoint()
    name = next(iter(ckpt["model"]))
    ckpt["model"][name] = ckpt["model"][name] * NAN
    return ckpt


def _edited(change):
    ckpt = _checkpoint()
    change(ckpt)
    return ckpt


def _first(ckpt) -> str:
    return next(iter(ckpt["model"]))


def _nan_moment():
    ckpt = _checkpoint()
    state = ckpt["optimizer"]["state"]
    if state:
        first = next(iter(state.values()))
        first["exp_avg"] = first["exp_avg"] * NAN
    return ckpt


# fmt: off
CASES = [
    # counters.py
    bad("bookkeeping.step_schedule", "batches_per_epoch=10**9", lambda: B.step_schedule(10**9, 4), "batches_per_epoch"),
    bad("bookkeeping.step_schedule", "epochs=10**9", lambda: B.step_schedule(10, 4, 10**9), "epochs"),
    bad("bookkeeping.step_schedule", "counter 'Global'", lambda: B.step_schedule(10, 4, counter="Global"), "counter", "'global'"),
    bad("bookkeeping.step_schedule", "accumulation_steps=0", lambda: B.step_schedule(10, 0), "accumulation_steps", "0"),
    bad("bookkeeping.Schedule.position_after", "steps_done=99", lambda: B.step_schedule(10, 4).position_after(99), "steps_done", "99"),
    bad("bookkeeping.scheduler_total_steps", "epochs=0", lambda: B.scheduler_total_steps(10, 4, 0), "epochs", "0"),
    bad("bookkeeping.scheduler_total_steps", "batches_per_epoch '10'", lambda: B.scheduler_total_steps("10", 4, 1), "batches_per_epoch", "'10'"),
    bad("bookkeeping.position_from_step", "step=-1", lambda: B.position_from_step(-1, 10, 4), "step", "-1"),
    bad("bookkeeping.position_from_step", "rule 'k'", lambda: B.position_from_step(3, 10, 4, "k"), "rule", "'k'"),
    bad("bookkeeping.warmup_lrs", "warmup_steps=10 of 10", lambda: B.warmup_lrs(10, 10, 5), "warmup_steps", "10"),
    bad("bookkeeping.warmup_lrs", "steps_taken=10**9", lambda: B.warmup_lrs(10, 2, 10**9), "steps_taken"),
    bad("bookkeeping.warmup_lrs", "total_steps=0", lambda: B.warmup_lrs(0, 0, 5), "total_steps", "0"),
    bad("bookkeeping.linear_warmup", "warmup_steps > total_steps", lambda: B.linear_warmup(10, 20), "warmup_steps", "20"),
    bad("bookkeeping.linear_warmup", "total_steps=0", lambda: B.linear_warmup(0, 0), "total_steps", "0"),
    # logs.py
    bad("bookkeeping.logged_curves", "trace 'x'", lambda: B.logged_curves("x"), "trace", "str"),
    bad("bookkeeping.logging_runs", "ks '14'", lambda: B.logging_runs("14"), "ks", "str"),
    bad("bookkeeping.logging_runs", "k=3 does not divide 64", lambda: B.logging_runs((3,)), "k", "3"),
    bad("bookkeeping.logging_runs", "steps=10**9", lambda: B.logging_runs((1,), steps=10**9), "steps"),
    bad("bookkeeping.logging_runs", "lr=nan", lambda: B.logging_runs((1,), lr=NAN), "lr", "nan"),
    bad("bookkeeping.micro_step_axis", "n_steps=-1", lambda: B.micro_step_axis(-1, 2), "n_steps", "-1"),
    bad("bookkeeping.micro_step_axis", "n_steps=10**9", lambda: B.micro_step_axis(10**9, 2), "n_steps"),
    bad("bookkeeping.micro_step_axis", "k=0", lambda: B.micro_step_axis(3, 0), "k", "0"),
    bad("bookkeeping.mixed_axis_log", "schedule 'x'", lambda: B.mixed_axis_log("x"), "schedule", "str"),
    bad("bookkeeping.mixed_axis_log", "loss_axis 'step'", lambda: B.mixed_axis_log(B.step_schedule(10, 4), "step"), "loss_axis", "'step'"),
    # loop.py
    bad("bookkeeping.Setup", "batches_per_epoch=10**9", lambda: B.Setup(batches_per_epoch=10**9), "batches_per_epoch"),
    bad("bookkeeping.Setup", "micro_batch_size=10**9", lambda: B.Setup(micro_batch_size=10**9), "micro_batch_size"),
    bad("bookkeeping.Setup", "optimizer 'AdamW'", lambda: B.Setup(optimizer="AdamW"), "optimizer", "'adamw'"),
    bad("bookkeeping.Setup", "lr=nan", lambda: B.Setup(lr=NAN), "lr", "nan"),
    bad("bookkeeping.Setup", "dropout=nan", lambda: B.Setup(dropout=NAN), "dropout", "nan"),
    bad("bookkeeping.Setup", "warmup_ratio=nan", lambda: B.Setup(warmup_ratio=NAN), "warmup_ratio", "nan"),
    bad("bookkeeping.Setup", "seed=2**70", lambda: B.Setup(seed=2**70), "seed"),
    bad("bookkeeping.Setup", "counter 'epoch'", lambda: B.Setup(counter="epoch"), "counter", "'epoch'"),
    bad("bookkeeping.Setup", "depth=0", lambda: B.Setup(depth=0), "depth", "0"),
    bad("bookkeeping.Setup", "depth=10**9", lambda: B.Setup(depth=10**9), "depth"),
    bad("bookkeeping.train", "setup {}", lambda: B.train({}), "setup", "dict"),
    bad("bookkeeping.train", "stop_at=0", lambda: B.train(_small(), stop_at=0), "stop_at", "0"),
    bad("bookkeeping.train", "keep_checkpoints 'yes'", lambda: B.train(_small(), keep_checkpoints="yes"), "keep_checkpoints", "'yes'"),
    # checkpoints.py
    bad("bookkeeping.save_checkpoint", "checkpoint {}", lambda: B.save_checkpoint({}, "/tmp/x.pt"), "checkpoint"),
    bad("bookkeeping.save_checkpoint", "path into a missing folder", lambda: B.save_checkpoint(_checkpoint(), "/no/such/folder/ck.pt"), "path", "/no/such/folder"),
    bad("bookkeeping.save_checkpoint", "path 5", lambda: B.save_checkpoint(_checkpoint(), 5), "path", "5"),
    bad("bookkeeping.load_checkpoint", "a missing file", lambda: B.load_checkpoint("/no/such/file.pt"), "path", "/no/such/file.pt"),
    bad("bookkeeping.load_checkpoint", "path None", lambda: B.load_checkpoint(None), "path", "None"),
    bad("bookkeeping.resume", "checkpoint {}", lambda: B.resume({}), "checkpoint"),
    bad("bookkeeping.resume", "omit 'rng'", lambda: B.resume(_checkpoint(), omit="rng"), "omit", "'rng'"),
    bad("bookkeeping.resume", "setup 'x'", lambda: B.resume(_checkpoint(), setup="x"), "setup", "str"),
    bad("bookkeeping.resume", "a setup with another micro-batch size", lambda: B.resume(_checkpoint(), setup=_small(micro_batch_size=5)), "micro_batch_size"),
    bad("bookkeeping.final_error", "run 'x'", lambda: B.final_error("x", B.train(_small())), "run", "str"),
    bad("bookkeeping.final_error", "runs of different models", lambda: B.final_error(B.train(_small()), B.Run(_small(), 0, 0, params={"w": torch.ones(1)})), "run", "reference"),
    bad("bookkeeping.read_counts", "parts 'x'", lambda: B.read_counts("x", 20, 2), "parts", "str"),
    bad("bookkeeping.read_counts", "samples=0", lambda: B.read_counts([B.train(_small())], 0, 2), "samples", "0"),
    bad("bookkeeping.resume_damage", "stop_at=10**6", lambda: B.resume_damage(_small(), 10**6), "stop_at"),
    bad("bookkeeping.resume_damage", "omissions 'none'", lambda: B.resume_damage(_small(), 3, "none"), "omissions", "str"),
    bad("bookkeeping.resume_damage", "setup 'x'", lambda: B.resume_damage("x"), "setup", "str"),
    bad("bookkeeping.resume_damage", "omissions ['rng']", lambda: B.resume_damage(_small(), 3, ["rng"]), "omissions", "'rng'"),
    # tokens.py
    bad("bookkeeping.tokens_per_step", "lengths 'abc'", lambda: B.tokens_per_step("abc", 2, 2), "lengths", "str"),
    bad("bookkeeping.tokens_per_step", "lengths [-1]", lambda: B.tokens_per_step([-1], 2, 2), "lengths", "-1"),
    bad("bookkeeping.tokens_per_step", "ranks=0", lambda: B.tokens_per_step([3, 4], 2, 2, ranks=0), "ranks", "0"),
    handled("bookkeeping.tokens_per_step", "lengths as a tensor", lambda: B.tokens_per_step(torch.tensor([3, 4, 5]), 2, 1), lambda b: b.real == [7, 5]),
    # explorer.py
    bad("bookkeeping.explorer_setup", "k=99", lambda: B.explorer_setup(99, 3, "global"), "k", "99"),
    bad("bookkeeping.explorer_setup", "counter 'x'", lambda: B.explorer_setup(4, 3, "x"), "counter", "'x'"),
    bad("bookkeeping.bookkeeping_data", "stop_at=0", lambda: B.bookkeeping_data(stop_at=0), "stop_at", "0"),
    bad("bookkeeping.bookkeeping_data", "omission 'rng'", lambda: B.bookkeeping_data(omission="rng"), "omission", "'rng'"),
    # plots.py
    bad("bookkeeping.plot_logged_losses", "curves {}", lambda: B.plot_logged_losses({}), "curves"),
    bad("bookkeeping.plot_logged_losses", "keys ['x']", lambda: B.plot_logged_losses({1: {"window": [1.0]}}, keys=["x"]), "keys", "'x'"),
    bad("bookkeeping.plot_logged_losses", "a curve without the key", lambda: B.plot_logged_losses({1: {}}), "curves"),
    bad("bookkeeping.plot_schedules", "schedules {}", lambda: B.plot_schedules({}), "schedules"),
    bad("bookkeeping.plot_schedules", "a schedule 'x'", lambda: B.plot_schedules({"a": "x"}), "schedules", "str"),
    bad("bookkeeping.plot_log_ratio", "runs {}", lambda: B.plot_log_ratio({}), "runs"),
    bad("bookkeeping.plot_log_ratio", "a run 'x'", lambda: B.plot_log_ratio({"a": "x"}), "runs", "str"),
    bad("bookkeeping.plot_lr_schedules", "curves {}", lambda: B.plot_lr_schedules({}), "curves"),
    bad("bookkeeping.plot_lr_schedules", "peak_lr=nan", lambda: B.plot_lr_schedules({"a": [1.0]}, peak_lr=NAN), "peak_lr", "nan"),
    bad("bookkeeping.plot_resume_damage", "checks []", lambda: B.plot_resume_damage([]), "checks"),
    bad("bookkeeping.plot_resume_damage", "checks ['x']", lambda: B.plot_resume_damage(["x"]), "checks", "str"),
    bad("bookkeeping.plot_tokens_per_step", "budget {}", lambda: B.plot_tokens_per_step({}), "budget", "dict"),
    bad("bookkeeping.plot_bookkeeping_explorer", "data {}", lambda: B.plot_bookkeeping_explorer({}), "data"),
    bad("bookkeeping.update_bookkeeping_explorer", "data {}", lambda: B.update_bookkeeping_explorer(Figure(), {}), "d"),
    bad("bookkeeping.explorer_summary", "d {}", lambda: B.explorer_summary({}), "d"),
    # checkpoints checked for values, not keys only; a reference must describe the same setup
    bad("bookkeeping.resume", "NaN weights in the checkpoint", lambda: B.resume(_nan_weights()), "checkpoint", "nan"),
    bad("bookkeeping.resume", "a NaN Adam moment in the checkpoint", lambda: B.resume(_nan_moment()), "checkpoint", "exp_avg", "nan"),
    bad("bookkeeping.resume", "copy_first 'no'", lambda: B.resume(_checkpoint(), copy_first="no"), "copy_first", "'no'"),
    bad("bookkeeping.save_checkpoint", "NaN weights", lambda: B.save_checkpoint(_nan_weights(), "/tmp/accumlab-fuzz-nan.pt"), "checkpoint", "nan"),
    bad("bookkeeping.resume_damage", "a reference of another k", lambda: B.resume_damage(_small(), 3, reference=B.train(_small(accumulation_steps=4))), "reference", "accumulation_steps=4"),
    bad("bookkeeping.resume_damage", "reference 'x'", lambda: B.resume_damage(_small(), 3, reference="x"), "reference", "str"),
    bad("bookkeeping.accelerate_sync_points", "prepared 'yes'", lambda: B.accelerate_sync_points(7, 4, 2, prepared="yes"), "prepared", "'yes'"),
    bad("bookkeeping.accelerate_sync_points", "accumulation_steps=0", lambda: B.accelerate_sync_points(7, 0, 2, prepared=True), "accumulation_steps", "0"),
    bad("bookkeeping.accelerate_sync_points", "epochs=10**9", lambda: B.accelerate_sync_points(7, 4, 10**9, prepared=True), "batches_per_epoch × epochs"),
    bad("bookkeeping.stock_loader_resume", "restore 'all'", lambda: B.stock_loader_resume("all"), "restore", "'all'"),
    bad("bookkeeping.stock_loader_resume", "stop_at past the run", lambda: B.stock_loader_resume("none", stop_at=99), "stop_at", "99"),
    bad("bookkeeping.stock_loader_resume", "batches_per_epoch=0", lambda: B.stock_loader_resume("none", batches_per_epoch=0), "batches_per_epoch", "0"),
    bad("bookkeeping.window_samples", "ranks=0", lambda: B.window_samples(20, 2, 2, 0), "ranks", "0"),
    bad("bookkeeping.window_samples", "samples=10**9", lambda: B.window_samples(10**9, 2, 2, 2), "samples must be at most"),
    bad("bookkeeping.window_grads", "window past the epoch", lambda: B.window_grads(20, 2, 2, 2, window=9), "window", "9"),
    bad("bookkeeping.window_grads", "no full window", lambda: B.window_grads(6, 2, 2, 2), "samples=6 holds no full window"),
    bad("bookkeeping.window_grads", "k=1.5", lambda: B.window_grads(20, 2, 1.5, 2), "k", "1.5"),
    bad("bookkeeping.skipped_step_counts", "windows=0", lambda: B.skipped_step_counts(windows=0), "windows", "0"),
    bad("bookkeeping.skipped_step_counts", "an overflow past the run", lambda: B.skipped_step_counts(windows=4, overflow_in=(4,)), "overflow_in", "4"),
    bad("bookkeeping.dropout_masks_split_alike", "parts=3 for 4 rows", lambda: B.dropout_masks_split_alike(4, 3), "parts", "3"),
    bad("bookkeeping.dropout_masks_split_alike", "p=1.0", lambda: B.dropout_masks_split_alike(p=1.0), "p", "1.0"),
    bad("bookkeeping.dropout_masks_split_alike", "rows=10**9", lambda: B.dropout_masks_split_alike(10**9, 2), "rows"),
    bad("bookkeeping.dropout_masks_split_alike", "layers=0", lambda: B.dropout_masks_split_alike(layers=0), "layers", "0"),
    bad("bookkeeping.dropout_masks_split_alike", "layers '2'", lambda: B.dropout_masks_split_alike(layers="2"), "layers", "'2'"),
    handled("bookkeeping.cpu_description", "no arguments", B.cpu_description, lambda text: isinstance(text, str) and "torch" in text),
    bad("bookkeeping.Setup", "accumulation_steps=0", lambda: B.Setup(accumulation_steps=0), "accumulation_steps", "0"),
    bad("bookkeeping.Setup", "epochs=2.5", lambda: B.Setup(epochs=2.5), "epochs", "2.5"),
    bad("bookkeeping.train", "stop_at=True", lambda: B.train(_small(), stop_at=True), "stop_at", "True"),
    bad("bookkeeping.position_from_step", "step 2.0", lambda: B.position_from_step(2.0, 10, 4), "step", "2.0"),
    bad("bookkeeping.tokens_per_step", "lengths [nan]", lambda: B.tokens_per_step([NAN], 2, 2), "lengths[0]", "nan"),
    bad("bookkeeping.plot_lr_schedules", "a NaN learning rate", lambda: B.plot_lr_schedules({"a": [1.0, NAN]}), "curves", "nan"),
    bad("bookkeeping.plot_logged_losses", "a NaN loss", lambda: B.plot_logged_losses({1: {"window": [NAN], "last_scaled": [1.0], "sum_of_unscaled": [1.0]}}), "curves", "nan"),
    handled("bookkeeping.step_schedule", "sizes as numpy integers", lambda: B.step_schedule(np.int64(10), np.int64(4)), lambda s: s.steps == 3),
    handled("bookkeeping.scheduler_total_steps", "0-d tensors", lambda: B.scheduler_total_steps(torch.tensor(103), torch.tensor(4), torch.tensor(3)), lambda n: n == 78),
    handled("bookkeeping.position_from_step", "a numpy step", lambda: B.position_from_step(np.int64(3), 10, 4), lambda p: p == 10),
    handled("bookkeeping.tokens_per_step", "lengths as a numpy array", lambda: B.tokens_per_step(np.array([3, 4, 5]), 2, 1), lambda b: b.real == [7, 5]),
    # a checkpoint edited by hand: values checked against its own setup before anything loads
    bad("bookkeeping.resume", "a weight of another shape", lambda: B.resume(_edited(lambda c: c["model"].__setitem__(_first(c), torch.ones(3)))), "checkpoint['model']", "(3,)"),
    bad("bookkeeping.resume", "a weight missing", lambda: B.resume(_edited(lambda c: c["model"].pop(_first(c)))), "checkpoint['model']", "missing"),
    bad("bookkeeping.resume", "a partial gradient of another shape", lambda: B.resume(_edited(lambda c: c["grads"].__setitem__(_first(c), torch.ones(3)))), "checkpoint['grads']", "(3,)"),
    bad("bookkeeping.resume", "a step counter the data position does not give", lambda: B.resume(_edited(lambda c: c.__setitem__("step", 5))), "checkpoint['step']", "5", "micro_step=3"),
    bad("bookkeeping.resume", "step=-1", lambda: B.resume(_edited(lambda c: c.__setitem__("step", -1))), "checkpoint['step']", "-1"),
    bad("bookkeeping.resume", "micro_step past the run", lambda: B.resume(_edited(lambda c: c.__setitem__("micro_step", 10**6))), "checkpoint['micro_step']", "1000000"),
    bad("bookkeeping.resume", "micro_step 'x'", lambda: B.resume(_edited(lambda c: c.__setitem__("micro_step", "x"))), "checkpoint['micro_step']", "'x'"),
    bad("bookkeeping.resume", "an RNG state that is not one", lambda: B.resume(_edited(lambda c: c.__setitem__("torch_rng", torch.ones(3)))), "checkpoint['torch_rng']", "(3,)"),
    bad("bookkeeping.resume", "optimizer {}", lambda: B.resume(_edited(lambda c: c.__setitem__("optimizer", {}))), "checkpoint['optimizer']", "param_groups"),
    bad("bookkeeping.resume", "a NaN learning rate in the optimizer", lambda: B.resume(_edited(lambda c: c["optimizer"]["param_groups"][0].__setitem__("lr", NAN))), "checkpoint['optimizer']", "'lr'", "nan"),
    bad("bookkeeping.resume", "a NaN base_lrs in the scheduler", lambda: B.resume(_edited(lambda c: c["scheduler"].__setitem__("base_lrs", [NAN]))), "checkpoint['scheduler']", "base_lrs", "nan"),
    bad("bookkeeping.resume", "an Adam moment of another shape", lambda: B.resume(_edited(lambda c: next(iter(c["optimizer"]["state"].values())).__setitem__("exp_avg", torch.ones(7)))), "exp_avg", "(7,)"),
    bad("bookkeeping.resume", "a setup key that is no field", lambda: B.resume(_edited(lambda c: c["setup"].__setitem__("foo", 1))), "checkpoint['setup']", "foo"),
    bad("bookkeeping.resume", "a setup with k=0", lambda: B.resume(_edited(lambda c: c["setup"].__setitem__("accumulation_steps", 0))), "checkpoint['setup']", "accumulation_steps", "0"),
    bad("bookkeeping.resume", "model 'x'", lambda: B.resume(_edited(lambda c: c.__setitem__("model", "x"))), "checkpoint['model']", "str"),
    bad("bookkeeping.resume", "a NaN running sum of the window", lambda: B.resume(_edited(lambda c: c["window"].__setitem__("loss_sum", NAN))), "checkpoint['window']", "nan"),
    bad("bookkeeping.save_checkpoint", "step -1", lambda: B.save_checkpoint(_edited(lambda c: c.__setitem__("step", -1)), "/tmp/accumlab-fuzz-step.pt"), "checkpoint['step']", "-1"),
    handled("bookkeeping.train", "a Setup of numpy numbers", lambda: B.train(_small(seed=np.int64(1), accumulation_steps=np.int64(2), lr=np.float32(0.01)), stop_at=3), lambda r: type(r.setup.seed) is int and len(r.consumed) == 3),
    bad("bookkeeping.Schedule.epoch_of", "micro_step=-1", lambda: B.step_schedule(10, 4).epoch_of(-1), "micro_step", "-1"),
    bad("bookkeeping.Schedule.epoch_of", "micro_step past the run", lambda: B.step_schedule(10, 4).epoch_of(99), "micro_step", "99"),
    bad("bookkeeping.Setup.warmup_steps", "total_steps=nan", lambda: B.Setup().warmup_steps(NAN), "total_steps", "nan"),
    bad("bookkeeping.Setup.warmup_steps", "total_steps=-1", lambda: B.Setup().warmup_steps(-1), "total_steps", "-1"),
]
# fmt: on
