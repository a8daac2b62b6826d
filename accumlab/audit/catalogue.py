"""A catalogue of accumulation loops, right and wrong, as a learner would write them (lesson 08).

Each loop trains one epoch: `fn(model, optimizer, batches, k, **extras)` with `batches` a list of
`(x, y)` micro-batches. The lesson's "spot the bug" gallery and the tests share these entries: each
names the setup it runs on and the finding codes the audit must report — no more, no fewer.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .._validate import one_of
from ..data import regression_data, token_data
from ..models import TinyLM, mlp
from .auditor import audit
from .findings import AuditReport


def audit_setup(name: str = "regression", **options) -> dict:
    """Keyword arguments for `al.audit` on a fresh tiny model and data set. Lesson 08.

    regression: 40 samples, micro-batches of 4, k = 4, so the epoch has windows of 4, 4 and 2.
    tokens: 14 padded sequences of 2–12 real tokens, micro-batches of 2, k = 3 (windows 3, 3, 1).
    batchnorm: the regression setup with a BatchNorm MLP.
    `options` (max_norm, scheduler, scaler, ...) are passed on to `al.audit`.
    """
    one_of("name", name, SETUPS)
    return {**SETUPS[name](), **options}


def _regression(norm: str = "none") -> dict:
    return {
        "model": mlp(features=4, hidden=8, depth=1, norm=norm, seed=0),
        "data": regression_data(n=40, features=4, seed=0),
        "micro_batch_size": 4,
        "accumulation_steps": 4,
        "loss": "mse",
    }


def _tokens() -> dict:
    return {
        "model": TinyLM(vocab=16, dim=8, seed=0),
        "data": token_data(n=14, min_len=2, max_len=12, vocab=16, seed=0),
        "micro_batch_size": 2,
        "accumulation_steps": 3,
        "loss": "cross_entropy",
    }


SETUPS: dict[str, Callable[[], dict]] = {
    "regression": _regression,
    "tokens": _tokens,
    "batchnorm": lambda: _regression("batch"),
}


@dataclass(frozen=True)
class CatalogueLoop:
    """One loop of the gallery: its code, the setup it runs on, and the codes the audit must find."""

    name: str
    fn: Callable
    expected: frozenset[str]
    setup: str = "regression"
    options: dict = field(default_factory=dict)  # max_norm / scheduler / scaler for al.audit
    kind: str = "bug"  # "bug", "correct" or "broken" (bad input the audit must survive)
    question: str = "What will the audit say about this loop?"

    @property
    def source(self) -> str:
        return inspect.getsource(self.fn)

    def audit(self) -> AuditReport:
        return audit(self.fn, **audit_setup(self.setup, **self.options))

    def _repr_markdown_(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        on = f"setup `{self.setup}`" + (f", with {opts}" if opts else "")
        return f"**{self.name}** ({on}) — {self.question}\n\n```python\n{self.source}```"


# ------------------------------------------------------------------------------- right loops


def correct_loop(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        start = i - i % k
        window = min(k, len(batches) - start)  # the last window may hold fewer than k
        loss = F.mse_loss(model(x), y) / window  # each window's gradient is the mean of its batches
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


# ------------------------------------------------------------------------------- buggy loops


def loss_not_divided(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def zero_grad_inside_window(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()


def mystery_loop(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()


def step_every_micro_batch(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def off_by_one_schedule(model, optimizer, batches, k):
    for step, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (step - step % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        if step % k != 0:
            continue
        optimizer.step()
        optimizer.zero_grad()


def last_window_dropped(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        loss = F.mse_loss(model(x), y) / k
        loss.backward()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()


def last_window_underweighted(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        loss = F.mse_loss(model(x), y) / k
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def mean_of_means(model, optimizer, batches, k):
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        for x, y in window:
            logits = model(x)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100)
            (loss / len(window)).backward()
        optimizer.step()
        optimizer.zero_grad()


def clip_every_micro_batch(model, optimizer, batches, k, *, max_norm):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def scheduler_every_micro_batch(model, optimizer, batches, k, *, scheduler):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        loss.backward()
        scheduler.step()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def unscale_every_micro_batch(model, optimizer, batches, k, *, scaler, max_norm):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


def clip_before_unscale(model, optimizer, batches, k, *, scaler, max_norm):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        scaler.scale(loss).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


def scaler_update_every_micro_batch(model, optimizer, batches, k, *, scaler):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = F.mse_loss(model(x), y) / window
        scaler.scale(loss).backward()
        scaler.update()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            scaler.step(optimizer)
            optimizer.zero_grad()


def stray_factor(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        window = min(k, len(batches) - (i - i % k))
        loss = 0.7 * F.mse_loss(model(x), y) / window
        loss.backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


# ------------------------------------------------------------------------------- bad input


def raises(model, optimizer, batches, k):
    total = 0.0
    for i, (x, y) in enumerate(batches):
        total = total + F.mse_loss(model(x), y) / k  # the running total keeps every graph
        total.backward()  # the second call goes back through the first, already freed, graph
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()


def builds_its_own_optimizer(model, optimizer, batches, k):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # the audited optimizer never steps
    for i, (x, y) in enumerate(batches):
        (F.mse_loss(model(x), y) / k).backward()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()


def replaces_a_layer(model, optimizer, batches, k):
    model[-1] = nn.Linear(model[-1].in_features, 2, dtype=torch.float64)  # a new head
    for x, y in batches:
        F.mse_loss(model(x)[:, :1], y).backward()
    optimizer.step()


def trains_until_perfect(model, optimizer, batches, k):
    loss = torch.tensor(1.0)
    while loss.item() > 0:  # a float loss never reaches exactly 0
        for x, y in batches:
            loss = F.mse_loss(model(x), y) / len(batches)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()


# ------------------------------------------------------------------------------- the catalogue

_CLIP = {"max_norm": 0.5}
_ENTRIES = [
    CatalogueLoop("correct_loop", correct_loop, frozenset(), kind="correct"),
    CatalogueLoop("loss_not_divided", loss_not_divided, frozenset({"LOSS_NOT_DIVIDED"})),
    CatalogueLoop(
        "zero_grad_inside_window", zero_grad_inside_window, frozenset({"ZERO_GRAD_IN_WINDOW"})
    ),
    CatalogueLoop(
        "mystery_loop",
        mystery_loop,
        frozenset({"GRADS_NEVER_ZEROED"}),
        question="Exercise 08.1: which code will the audit report?",
    ),
    CatalogueLoop(
        "step_every_micro_batch", step_every_micro_batch, frozenset({"STEP_EVERY_MICRO_BATCH"})
    ),
    CatalogueLoop("off_by_one_schedule", off_by_one_schedule, frozenset({"OFF_BY_ONE_SCHEDULE"})),
    CatalogueLoop("last_window_dropped", last_window_dropped, frozenset({"LAST_WINDOW_DROPPED"})),
    CatalogueLoop(
        "last_window_underweighted",
        last_window_underweighted,
        frozenset({"LAST_WINDOW_UNDERWEIGHTED"}),
    ),
    CatalogueLoop("mean_of_means", mean_of_means, frozenset({"MEAN_OF_MEANS"}), "tokens"),
    CatalogueLoop(
        "clip_every_micro_batch",
        clip_every_micro_batch,
        frozenset({"CLIP_PER_MICRO_BATCH"}),
        options=_CLIP,
    ),
    CatalogueLoop(
        "scheduler_every_micro_batch",
        scheduler_every_micro_batch,
        frozenset({"SCHEDULER_PER_MICRO_BATCH"}),
        options={"scheduler": True},
    ),
    CatalogueLoop(
        "unscale_every_micro_batch",
        unscale_every_micro_batch,
        frozenset({"UNSCALE_MISUSE"}),
        options={**_CLIP, "scaler": True},
    ),
    CatalogueLoop(
        "clip_before_unscale",
        clip_before_unscale,
        frozenset({"UNSCALE_MISUSE"}),
        options={**_CLIP, "scaler": True},
    ),
    CatalogueLoop(
        "scaler_update_every_micro_batch",
        scaler_update_every_micro_batch,
        frozenset({"SCALER_MISUSE"}),
        options={"scaler": True},
    ),
    CatalogueLoop(
        "correct_loop_with_batchnorm",
        correct_loop,
        frozenset({"BATCHNORM_STATS"}),
        "batchnorm",
        kind="correct",
        question="The loop is the correct one; the model has BatchNorm. What will the audit say?",
    ),
    CatalogueLoop("stray_factor", stray_factor, frozenset({"UNEXPLAINED_GRADIENT"})),
    CatalogueLoop("raises", raises, frozenset({"STEP_RAISED"}), kind="broken"),
    CatalogueLoop(
        "builds_its_own_optimizer", builds_its_own_optimizer, frozenset({"NO_STEPS"}), kind="broken"
    ),
    CatalogueLoop(
        "replaces_a_layer", replaces_a_layer, frozenset({"MODEL_CHANGED"}), kind="broken"
    ),
    CatalogueLoop(
        "trains_until_perfect", trains_until_perfect, frozenset({"RUNAWAY_LOOP"}), kind="broken"
    ),
]
CATALOGUE: dict[str, CatalogueLoop] = {entry.name: entry for entry in _ENTRIES}


def catalogue_loop(name: str) -> CatalogueLoop:
    """The catalogue entry `name` (lesson 08's gallery): `.source`, `.audit()`, `.expected`."""
    one_of("name", name, CATALOGUE)
    return CATALOGUE[name]
