"""Exact resume, and what each missing piece of a checkpoint costs: checkpoint files, resuming with
an omission, and the measured damage against the uninterrupted run. Introduced in lesson 10.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import _validate
from .._validate import one_of
from .checkpoint_checks import check_checkpoint, check_loadable, load
from .counters import position_from_step
from .loop import Loop, Run, Setup, train
from .loop import stop_at_in as _stop_at

# What a resumed run gets wrong (lesson 10):
#   none                  — everything restored: the run continues bit for bit
#   rewind, interruption's RNG — the position goes back to where the window in progress began
#                           (the schedule's position after the last optimizer step) and the
#                           partial window is read again with the RNG state of the interruption:
#                           exact only if the window drew no random numbers (no dropout); a
#                           checkpoint holding the window start's RNG state rewinds exactly
#   position by Trainer's rule — the position derived from the step counter as the Transformers
#                           Trainer does (⌈batches / k⌉ steps per epoch): the window's start for
#                           the sync_at_epoch_end counter, elsewhere for the other two
#   position forgets × k  — the Trainer's rule without the × k: whole epochs, then (step mod
#                           steps per epoch) micro-batches (position_from_step's "forgets_k")
#   data position = step × k — ignores the short window that ends every epoch
#   partial window's .grad — interrupted inside a window, the accumulated .grad is not saved
#   sampler RNG           — the data order restarts from the seed (this epoch reshuffled)
#   dropout RNG           — the dropout masks restart from the seed
#   optimizer state       — AdamW's moments and step count start again from zero
#   scheduler state       — the warm-up starts again
#   a different k         — resumed with twice the accumulation steps
OMISSIONS = (
    "none",
    "rewind, interruption's RNG",
    "position by Trainer's rule",
    "position forgets × k",
    "data position = step × k",
    "partial window's .grad",
    "sampler RNG",
    "dropout RNG",
    "optimizer state",
    "scheduler state",
    "a different k",
)
_POSITION_RULE = {
    "position by Trainer's rule": "trainer",
    "position forgets × k": "forgets_k",
    "data position = step × k": "step_times_k",
}


def save_checkpoint(checkpoint: dict, path) -> Path:
    """Write a checkpoint (the dict `train(..., stop_at=...)` returns in `run.checkpoint`) to
    `path` with torch.save. Lesson 10."""
    check_checkpoint(checkpoint)
    path = _validate.file_path("path", path)
    torch.save(checkpoint, path)
    return path


def load_checkpoint(path) -> dict:
    """Read a checkpoint written by `save_checkpoint` (tensors and plain values only, so
    `weights_only=True` suffices). Lesson 10."""
    path = _validate.file_path("path", path, exists=True)
    checkpoint = torch.load(path, weights_only=True)
    check_checkpoint(checkpoint)
    return checkpoint


def resume(
    checkpoint: dict, *, omit: str = "none", setup: Setup | None = None, copy_first: bool = True
) -> Run:
    """Continue a run from `checkpoint` to its end, restoring everything except `omit` (one of
    OMISSIONS). `setup` overrides the checkpoint's own (a different k, for example).
    `copy_first=False` loads the caller's dict itself, as plain `load_state_dict` code does: the
    resumed optimizer then updates the checkpoint's tensors in place (lesson 10 measures it)."""
    saved = check_checkpoint(checkpoint)
    one_of("omit", omit, OMISSIONS)
    _validate.flag("copy_first", copy_first)
    # load_state_dict keeps the tensors it is given and the optimizer then updates them in place
    # (see `load_aliasing`): work on a copy so the caller's checkpoint stays what it was
    if copy_first:
        checkpoint = copy.deepcopy(checkpoint)
    if setup is None:
        setup = saved
        if omit == "a different k":
            setup = dataclasses.replace(saved, accumulation_steps=2 * saved.accumulation_steps)
    elif not isinstance(setup, Setup):
        raise ValueError(f"setup must be an al.bookkeeping.Setup, got {type(setup).__name__}")
    loop = Loop(setup)
    check_loadable(checkpoint, loop)
    load("model", loop.model, checkpoint["model"])
    if omit != "optimizer state":
        load("optimizer", loop.optimizer, checkpoint["optimizer"])
    if omit != "scheduler state":
        load("scheduler", loop.scheduler, checkpoint["scheduler"])
    loop.step = checkpoint["step"]  # the step counter itself is never lost (it names the file)
    # data position, counted in samples so that a different micro-batch size still lands right
    samples = checkpoint["micro_step"] * saved.micro_batch_size
    if omit == "rewind, interruption's RNG":
        samples = saved.micro_batch_size * saved.schedule().position_after(checkpoint["step"])
    elif omit in _POSITION_RULE:
        samples = saved.micro_batch_size * position_from_step(
            checkpoint["step"],
            saved.batches_per_epoch,
            saved.accumulation_steps,
            _POSITION_RULE[omit],
        )
    if samples % setup.micro_batch_size:
        raise ValueError(
            f"the checkpoint stopped after {samples} samples, not a whole number of "
            f"micro-batches of the setup's micro_batch_size={setup.micro_batch_size}"
        )
    loop.micro_step = samples // setup.micro_batch_size
    moved = loop.micro_step * setup.micro_batch_size != (
        checkpoint["micro_step"] * saved.micro_batch_size
    )
    if not moved and omit != "partial window's .grad":
        # the window in progress: its accumulated gradient and its log line's running sums
        for name, p in loop.model.named_parameters():
            if name in checkpoint["grads"]:
                p.grad = checkpoint["grads"][name].clone()
        loop.window = dict(checkpoint["window"])
    if omit != "dropout RNG":
        # the CPU generator's state only: this loop runs on the CPU. A CUDA run's dropout draws
        # from the device's generators, which a checkpoint must save too
        # (torch.cuda.get_rng_state_all(); the Transformers Trainer's rng_state.pth holds the CUDA
        # state too)
        loop.torch_rng = checkpoint["torch_rng"].clone()
    epoch = loop.micro_step // setup.batches_per_epoch
    if omit != "sampler RNG":  # without it the epoch's order is drawn from the seed again
        if epoch == checkpoint["micro_step"] // saved.batches_per_epoch:
            loop.sampler.set_state(checkpoint["sampler_epoch_start"])
        else:  # a position moved into another epoch reads that epoch's order (drawn from the
            loop.sampler = loop.sampler_at_epoch(epoch)  # seed, as a per-epoch seed would)
    if loop.micro_step % setup.batches_per_epoch:  # mid-epoch: draw its order again now
        loop.epoch_start = loop.sampler.get_state()
        loop.order = torch.randperm(setup.samples, generator=loop.sampler)
    return loop.run()


def load_aliasing() -> dict:
    """Does `Optimizer.load_state_dict` copy the state it is given? One AdamW step, its state dict
    loaded into a second AdamW, one step of that: returns whether the loaded optimizer holds the
    dict's own tensors, and the dict's `step` before and after the second optimizer stepped.
    Lesson 10."""
    first = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    opt = torch.optim.AdamW([first], lr=0.1)
    first.grad = torch.ones_like(first)
    opt.step()
    state = opt.state_dict()
    before = float(state["state"][0]["step"])
    second = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    loaded = torch.optim.AdamW([second], lr=0.1)
    loaded.load_state_dict(state)
    shared = loaded.state[second]["exp_avg"] is state["state"][0]["exp_avg"]
    second.grad = torch.ones_like(second)
    loaded.step()
    return {
        "shares_tensors": shared,
        "step_before": before,
        "step_after": float(state["state"][0]["step"]),
    }


@dataclass(frozen=True)
class ResumeCheck:
    """An interrupted-and-resumed run against the uninterrupted one (lesson 10)."""

    omission: str
    bit_exact: bool  # every final weight equal (torch.equal)
    rel_error: float  # ‖w − w_ref‖ / ‖w_ref‖ over the final weights
    steps: int  # optimizer steps of the whole run (the reference's differ only if the run did)
    extra_reads: int  # sample reads beyond one per sample per epoch
    missed_reads: int  # sample reads short of one per sample per epoch


def final_error(run: Run, reference: Run) -> tuple[bool, float]:
    """(bit-exact?, relative L2 distance) between two runs' final weights."""
    from ..compare import grad_diff  # any dict of tensors: here, weights

    for name, value in (("run", run), ("reference", reference)):
        _validate.instance(name, value, Run, "a Run al.bookkeeping.train(...) returns")
    if set(run.params) != set(reference.params):
        raise ValueError(
            f"run and reference must be runs of the same model, got parameters "
            f"{sorted(run.params)} and {sorted(reference.params)}"
        )
    exact = all(torch.equal(run.params[n], reference.params[n]) for n in reference.params)
    return exact, grad_diff(run.params, reference.params).rel_l2


def read_counts(parts: list[Run], samples: int, epochs: int) -> tuple[int, int]:
    """(extra, missed) sample reads over the whole run made of `parts`, against one read per
    sample per epoch."""
    parts = _validate.sequence("parts", parts)
    for i, part in enumerate(parts):
        _validate.instance(f"parts[{i}]", part, Run, "a Run al.bookkeeping.train(...) returns")
    samples = _validate.positive_int("samples", samples)
    epochs = _validate.positive_int("epochs", epochs)
    read = max((int(c.max()) for p in parts for c in p.consumed if c.numel()), default=-1)
    if read >= samples:
        raise ValueError(f"samples={samples}, but the runs read sample {read}")
    reads = torch.zeros(samples, dtype=torch.long)
    for part in parts:
        if part.consumed:
            reads += torch.bincount(torch.cat(part.consumed), minlength=samples)
    diff = reads - epochs
    return int(diff.clamp(min=0).sum()), int((-diff).clamp(min=0).sum())


def resume_damage(
    setup: Setup | None = None,
    stop_at: int = 153,
    omissions=OMISSIONS,
    *,
    reference: Run | None = None,
) -> list[ResumeCheck]:
    """Interrupt `setup` after `stop_at` micro-batches, resume once per omission, and compare
    each result with the uninterrupted run `reference` (default: train(setup); one passed in must
    be that run). The default stop, after 153 micro-batches, is inside a window of the second
    epoch. Lesson 10."""
    setup = Setup() if setup is None else setup
    if not isinstance(setup, Setup):
        raise ValueError(f"setup must be an al.bookkeeping.Setup, got {type(setup).__name__}")
    total = setup.batches_per_epoch * setup.epochs
    stop_at = _stop_at(stop_at, total)
    omissions = _validate.sequence("omissions", omissions)
    for i, omit in enumerate(omissions):
        one_of(f"omissions[{i}]", omit, OMISSIONS)
    if reference is not None:
        _validate.instance("reference", reference, Run, "a Run al.bookkeeping.train(...) returns")
        if reference.setup != setup or reference.first_micro_step != 0:
            # a reference of another setup would report its difference as a resume's damage
            raise ValueError(
                f"reference must be the uninterrupted run of the same setup, "
                f"al.bookkeeping.train(setup); got a run of {reference.setup} from micro-step "
                f"{reference.first_micro_step}, for {setup}"
            )
    reference = train(setup) if reference is None else reference
    first = train(setup, stop_at=stop_at)
    checks = []
    for omit in omissions:
        rest = resume(first.checkpoint, omit=omit)
        exact, err = final_error(rest, reference)
        extra, missed = read_counts([first, rest], setup.samples, setup.epochs)
        checks.append(ResumeCheck(omit, exact, err, rest.steps, extra, missed))
    return checks
