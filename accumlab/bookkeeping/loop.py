"""A training loop that can be interrupted anywhere and resumed: shuffled epochs, dropout, AdamW,
a warm-up schedule, and every piece of state a checkpoint must hold to continue bit for bit.
Introduced in lesson 10.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from .. import _validate
from .._threads import one_thread
from .._validate import one_of, positive_float, positive_int
from ..data import Data, regression_data
from ..models import MAX_DEPTH, mlp
from ..optim import OPTIMIZERS, make_optimizer
from .counters import COUNTERS, Schedule, check_micro_steps, linear_warmup, step_schedule

FEATURES, HIDDEN = 4, 8
# the window's scaling: `loss / k` always, or ÷ the micro-batches the window really holds (lesson 03)
SCALINGS = ("divide_by_k", "divide_by_actual")
LOG_KEYS = ("window", "sum_of_scaled", "last_scaled", "sum_of_unscaled")


@dataclass(frozen=True)
class Setup:
    """One run of lesson 10's loop: `epochs` shuffled epochs of `batches_per_epoch` micro-batches
    of `micro_batch_size` samples, an optimizer step per window as `counter` forms them."""

    accumulation_steps: int = 4
    micro_batch_size: int = 4
    batches_per_epoch: int = 103
    epochs: int = 3
    counter: str = "sync_at_epoch_end"
    last_window: str = "divide_by_actual"
    optimizer: str = "adamw"
    lr: float = 0.01
    warmup_ratio: float = 0.1
    dropout: float = 0.1
    seed: int = 0
    depth: int = 1  # hidden layers, each followed by dropout: one random draw per layer per forward

    def __post_init__(self):
        checked = {
            "accumulation_steps": positive_int("accumulation_steps", self.accumulation_steps),
            "micro_batch_size": positive_int("micro_batch_size", self.micro_batch_size),
            "batches_per_epoch": positive_int("batches_per_epoch", self.batches_per_epoch),
            "epochs": positive_int("epochs", self.epochs),
            "lr": positive_float("lr", self.lr),
            "warmup_ratio": _validate.fraction("warmup_ratio", self.warmup_ratio),
            "dropout": _validate.fraction("dropout", self.dropout),
            "seed": _validate.seed("seed", self.seed),
            "depth": positive_int("depth", self.depth, maximum=MAX_DEPTH),
        }
        for name, value in checked.items():  # stored as Python numbers: a numpy or 0-d tensor
            object.__setattr__(self, name, value)  # seed would reach torch.manual_seed as is
        one_of("counter", self.counter, COUNTERS)
        one_of("last_window", self.last_window, SCALINGS)
        one_of("optimizer", self.optimizer, OPTIMIZERS)
        check_micro_steps(self.batches_per_epoch, self.epochs)
        _validate.fits_in_memory(  # the data set: samples × (FEATURES inputs + 1 target) float64
            f"micro_batch_size × batches_per_epoch = {self.micro_batch_size} × "
            f"{self.batches_per_epoch} samples",
            self.samples * (FEATURES + 1) * 8,
        )

    @property
    def samples(self) -> int:
        return self.micro_batch_size * self.batches_per_epoch

    def schedule(self) -> Schedule:
        return step_schedule(
            self.batches_per_epoch, self.accumulation_steps, self.epochs, self.counter
        )

    def warmup_steps(self, total_steps: int) -> int:
        """Warm-up steps of a run of `total_steps` optimizer steps: ⌈warmup_ratio × total⌉."""
        return math.ceil(self.warmup_ratio * positive_int("total_steps", total_steps))

    def data(self) -> Data:
        return regression_data(n=self.samples, features=FEATURES, seed=self.seed)

    def model(self) -> torch.nn.Module:
        return mlp(FEATURES, HIDDEN, depth=self.depth, dropout=self.dropout, seed=self.seed)


@dataclass
class Run:
    """What a run (or the resumed part of one) did. Lists run over its optimizer steps, except
    `consumed` (sample indices read at each micro-step)."""

    setup: Setup
    first_micro_step: int  # where this part started reading (0 for a fresh run)
    first_step: int  # optimizer steps taken before this part
    params: dict[str, torch.Tensor] = field(default_factory=dict)  # at the end of this part
    logs: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in LOG_KEYS})
    lrs: list[float] = field(default_factory=list)
    trajectory: list[torch.Tensor] = field(default_factory=list)  # flat parameters after each step
    consumed: list[torch.Tensor] = field(default_factory=list)
    checkpoint: dict | None = None  # everything needed to continue, when the run was stopped
    checkpoints: dict[int, dict] = field(default_factory=dict)  # micro-step -> checkpoint there

    @property
    def steps(self) -> int:
        """Optimizer steps of the whole run up to the end of this part."""
        return self.first_step + len(self.lrs)


class Loop:
    """The state of one training run and the loop that advances it, one micro-step at a time."""

    def __init__(self, setup: Setup):
        self.setup = setup
        self.schedule = setup.schedule()
        self.lengths = self.schedule.window_lengths()
        self.ends = self.schedule.ends_window()
        self.data = setup.data()
        # Setup builds both: the model's (n, 1) output always matches y's (n, 1) targets, so the
        # loop's loss line needs no per-step shape check
        self.model = setup.model()
        self.optimizer = make_optimizer(setup.optimizer, self.model.parameters(), setup.lr)
        total = max(self.schedule.steps, 1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, linear_warmup(total, min(setup.warmup_steps(total), total - 1))
        )
        self.sampler = self.sampler_at_epoch(0)  # the data order's own RNG
        self.epoch_start = self.sampler.get_state()  # before this epoch's permutation was drawn
        self.order: torch.Tensor | None = None
        self.micro_step = 0
        self.step = 0
        self.torch_rng = _seeded_rng(setup.seed)  # dropout's RNG, kept out of the global one
        self.window = _empty_window()
        self._step_state: dict | None = None
        self._named = list(self.model.named_parameters())  # looked up once, not per checkpoint
        self._setup_dict = asdict(setup)

    def sampler_at_epoch(self, epoch: int) -> torch.Generator:
        """The data order's generator as it stands at the start of `epoch`: seeded once, one
        permutation drawn per epoch (so any epoch's order can be drawn again from the seed)."""
        sampler = torch.Generator().manual_seed(self.setup.seed + 1)
        for _ in range(epoch):
            torch.randperm(self.setup.samples, generator=sampler)
        return sampler

    # --- the loop ------------------------------------------------------------------------------

    def run(self, stop_at: int | None = None, *, keep_checkpoints: bool = False) -> Run:
        """Advance to micro-step `stop_at` (or to the end); return what happened on the way.
        `keep_checkpoints`: also keep the checkpoint an interruption before every micro-step
        would have written (the explorer resumes from them instead of re-running the start)."""
        end = self.schedule.micro_steps if stop_at is None else stop_at
        out = Run(self.setup, self.micro_step, self.step)
        b, mb = self.setup.batches_per_epoch, self.setup.micro_batch_size
        k = self.setup.accumulation_steps
        by_k = self.setup.last_window == "divide_by_k"
        count = mb * self.data.y[0].numel()  # items per micro-batch (MSE: one per target value)
        with torch.random.fork_rng(devices=[]), one_thread():
            torch.set_rng_state(self.torch_rng)
            while self.micro_step < end:
                g = self.micro_step
                if keep_checkpoints and g > out.first_micro_step:
                    self.torch_rng = torch.get_rng_state()
                    out.checkpoints[g] = self.checkpoint(share_step_state=True)
                i = g % b
                if i == 0 or self.order is None:
                    self.epoch_start = self.sampler.get_state()
                    self.order = torch.randperm(self.setup.samples, generator=self.sampler)
                idx = self.order[i * mb : (i + 1) * mb]
                x, y = self.data.x[idx], self.data.y[idx]
                # Recipe(normalization="mean").scale's line: the micro-batch mean ÷ k (or ÷ the
                # micro-batches the window really holds)
                loss_sum = F.mse_loss(self.model(x), y, reduction="sum")
                n_window = self.lengths[g] or k  # a leftover micro-batch is divided by k
                scaled = loss_sum / count / (k if by_k else n_window)
                scaled.backward()  # adds into .grad, also on top of a restored partial window
                out.consumed.append(idx)
                # the log line's sums stay tensors: no .item() (a host sync on a GPU) per
                # micro-step, one per logged number at the optimizer step
                w, value, scaled_value = self.window, loss_sum.detach(), scaled.detach()
                w["loss_sum"] += value
                w["count"] += count
                w["scaled"] += scaled_value
                w["last_scaled"] = scaled_value
                w["unscaled"] += value / count
                self.micro_step += 1
                if self.ends[g]:
                    self._optimizer_step(out)
            self.torch_rng = torch.get_rng_state()
        out.params = {n: p.detach().clone() for n, p in self.model.named_parameters()}
        if self.micro_step < self.schedule.micro_steps:
            out.checkpoint = self.checkpoint()
        return out

    def _optimizer_step(self, out: Run) -> None:
        out.lrs.append(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()
        self.scheduler.step()  # once per optimizer step, after it
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self._step_state = None  # model, optimizer and scheduler have moved
        w = _window_numbers(self.window)
        out.logs["window"].append(w["loss_sum"] / w["count"])  # every item weighs the same
        out.logs["sum_of_scaled"].append(w["scaled"])
        out.logs["last_scaled"].append(w["last_scaled"])
        out.logs["sum_of_unscaled"].append(w["unscaled"])
        out.trajectory.append(torch.cat([p.detach().reshape(-1) for _, p in self._named]))
        self.window = _empty_window()

    # --- checkpoints ---------------------------------------------------------------------------

    def checkpoint(self, *, share_step_state: bool = False) -> dict:
        """Everything the run needs to continue exactly, as plain tensors and numbers (a copy:
        the run may go on changing its own state). `share_step_state`: checkpoints taken between
        the same two optimizer steps share one copy of the model, optimizer and scheduler state
        (which only change at a step); `resume` never modifies a checkpoint."""
        grads = {n: p.grad.clone() for n, p in self._named if p.grad is not None}
        state = self._step_state if share_step_state else None
        if state is None:
            state = {
                "model": {n: t.clone() for n, t in self.model.state_dict().items()},
                "optimizer": _copied(self.optimizer.state_dict()),
                "scheduler": _copied(self.scheduler.state_dict()),
            }
            if share_step_state:
                self._step_state = state
        return {
            "setup": dict(self._setup_dict),
            "micro_step": self.micro_step,  # data position, in micro-batches of this setup
            "step": self.step,
            **state,
            # RNG states come from get_state() (new tensors) and are never changed in place; the
            # CPU generator's only (this loop runs on the CPU; see resume for a CUDA run)
            "torch_rng": self.torch_rng,
            # the state this epoch's order is drawn from: already drawn mid-epoch, about to be at
            # an epoch's start; a resumed run draws the same order again and skips what was read
            "sampler_epoch_start": (
                self.epoch_start
                if self.micro_step % self.setup.batches_per_epoch
                else self.sampler.get_state()
            ),
            "grads": grads,  # the partial window: empty at a window boundary
            "window": _window_numbers(self.window),  # running sums the window's log line needs
        }


def _copied(value):
    """A copy of a state dict: new containers and cloned tensors (copy.deepcopy costs several
    times more, and the explorer keeps one checkpoint per micro-step)."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value  # numbers, strings, None, tuples of those: immutable


def _window_numbers(window: dict) -> dict:
    """The window's running sums as Python numbers (the loop keeps them as tensors)."""
    return {k: v.item() if isinstance(v, torch.Tensor) else v for k, v in window.items()}


def _empty_window() -> dict:
    return {"loss_sum": 0.0, "count": 0, "scaled": 0.0, "last_scaled": 0.0, "unscaled": 0.0}


def _seeded_rng(seed: int) -> torch.Tensor:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.get_rng_state()


def stop_at_in(stop_at, total: int) -> int:
    """An interruption: after `stop_at` micro-batches, 1 to total − 1 (numpy integers and 0-d
    tensors accepted, like every count)."""
    if not _validate._is_int(stop_at) or not 0 < stop_at < total:
        raise ValueError(
            f"stop_at must be a number of micro-batches in [1, {total - 1}], got {stop_at!r}"
        )
    return int(stop_at)


def train(
    setup: Setup | None = None, *, stop_at: int | None = None, keep_checkpoints: bool = False
) -> Run:
    """Run `setup` from scratch, to the end or until it has run `stop_at` micro-batches (then
    `run.checkpoint` holds everything needed to continue). `keep_checkpoints=True` also keeps, in
    `run.checkpoints[m]`, the checkpoint an interruption after m micro-batches would write.
    Lesson 10."""
    setup = Setup() if setup is None else setup
    if not isinstance(setup, Setup):
        raise ValueError(f"setup must be an al.bookkeeping.Setup, got {type(setup).__name__}")
    _validate.flag("keep_checkpoints", keep_checkpoints)
    loop = Loop(setup)
    if stop_at is not None:
        total = loop.schedule.micro_steps
        stop_at = stop_at_in(stop_at, total)
    return loop.run(stop_at, keep_checkpoints=keep_checkpoints)
