"""A catalogue of accumulation loops, right and wrong, as a learner would write them (lesson 08).

The lesson's "spot the bug" gallery and the tests share these entries: each names the loop, the
setup it runs on and the finding codes the audit must report — no more, no fewer.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

from .._validate import one_of
from .auditor import audit
from .findings import AuditReport
from .loops import (
    builds_its_own_optimizer,
    calls_model_forward,
    clip_before_unscale,
    clip_every_micro_batch,
    correct_loop,
    last_window_underweighted,
    loss_divided_twice,
    loss_not_divided,
    mean_of_means,
    mystery_loop,
    off_by_one_schedule,
    raises,
    replaces_a_layer,
    scaler_step_skipped,
    scaler_update_every_micro_batch,
    scheduler_every_micro_batch,
    step_every_micro_batch,
    stray_factor,
    trains_until_perfect,
    unscale_every_micro_batch,
    zero_grad_inside_window,
)
from .loops_epochs import (
    CountAcrossEpochs,
    WindowsAcrossEpochs,
    last_window_carried,
    last_window_dropped,
)
from .loops_hidden import (
    bfloat16_autocast,
    float16_autocast,
    logging_forward_with_grad,
    normaliser_counts_padding,
    normalises_in_place,
    scheduler_before_optimizer,
    total_loss_keeps_graphs,
    undivided_under_clipping,
    unscale_and_update_every_micro_batch,
    zero_grad_and_undivided,
    zero_grad_before_step,
)
from .setups import audit_setup


@dataclass(frozen=True, repr=False)
class CatalogueLoop:
    """One loop of the gallery: its code, the setup it runs on, and the codes the audit must find."""

    name: str
    fn: Callable
    expected: frozenset[str]
    setup: str = "regression"
    options: dict = field(default_factory=dict)  # max_norm / scheduler / scaler for al.audit
    kind: str = (
        "bug"  # "bug", "policy", "note", "correct" or "broken" (bad input the audit must survive)
    )
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

    def __repr__(self) -> str:
        # no name and no expected codes: print(loop) must not answer exercise 08.1
        return f"CatalogueLoop(setup={self.setup!r}, options={self.options!r}): {self.question}"


# ------------------------------------------------------------------------------- the catalogue

_CLIP = {"max_norm": 0.5}
_ENTRIES = [
    CatalogueLoop(
        "correct_loop",
        correct_loop,
        frozenset(),
        kind="correct",
        question="Is it right on this setup?",
    ),
    CatalogueLoop("loss_not_divided", loss_not_divided, frozenset({"LOSS_NOT_DIVIDED"})),
    CatalogueLoop(
        "zero_grad_inside_window", zero_grad_inside_window, frozenset({"ZERO_GRAD_IN_WINDOW"})
    ),
    CatalogueLoop(
        "mystery_loop",
        mystery_loop,
        frozenset({"GRADS_NEVER_ZEROED"}),
        question="Exercise 08.1: which code will the audit report, and what fixes the loop?",
    ),
    CatalogueLoop(
        "step_every_micro_batch", step_every_micro_batch, frozenset({"STEP_EVERY_MICRO_BATCH"})
    ),
    CatalogueLoop("off_by_one_schedule", off_by_one_schedule, frozenset({"OFF_BY_ONE_SCHEDULE"})),
    CatalogueLoop(
        "last_window_carried",
        last_window_carried,
        frozenset({"LAST_WINDOW_CARRIED"}),
        question="10 micro-batches, k = 4, two epochs. What happens to each epoch's last two?",
    ),
    CatalogueLoop(
        "last_window_dropped",
        last_window_dropped,
        frozenset({"LAST_WINDOW_DROPPED"}),
        kind="policy",
    ),
    CatalogueLoop(
        "windows_across_epochs",
        WindowsAcrossEpochs,
        frozenset({"WINDOWS_CROSS_EPOCHS"}),
        kind="policy",
        question="The counter lives on the object, across epochs. Is anything lost?",
    ),
    CatalogueLoop(
        "count_across_epochs",
        CountAcrossEpochs,
        frozenset({"CARRIED_WINDOW_ZEROED"}),
        question="A counter across epochs, and zero_grad() when an epoch starts. What is lost?",
    ),
    CatalogueLoop(
        "last_window_underweighted",
        last_window_underweighted,
        frozenset({"LAST_WINDOW_UNDERWEIGHTED"}),
        kind="policy",
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
        "scaler_step_skipped",
        scaler_step_skipped,
        frozenset({"SCALER_STEP_SKIPPED"}),
        options={**_CLIP, "scaler": True},
        question="unscale_, clip, step, update: every call is there. Is every check?",
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
    CatalogueLoop("loss_divided_twice", loss_divided_twice, frozenset({"LOSS_DIVIDED_TWICE"})),
    CatalogueLoop("stray_factor", stray_factor, frozenset({"UNEXPLAINED_GRADIENT"})),
    CatalogueLoop(
        "normaliser_counts_padding",
        normaliser_counts_padding,
        frozenset({"UNEXPLAINED_GRADIENT"}),
        "tokens",
        question="Each loss divided by the window's token count. Which tokens?",
    ),
    CatalogueLoop(
        "bfloat16_autocast",
        bfloat16_autocast,
        frozenset({"UNEXPLAINED_GRADIENT"}),
        "float32",
        question="The correct loop, its forward in bfloat16 autocast. Does it match?",
    ),
    CatalogueLoop(
        "bfloat16_autocast_with_rtol",
        bfloat16_autocast,
        frozenset(),
        "float32",
        options={"rtol": 2e-2},
        kind="correct",
        question="The same loop, audited with rtol = 0.02. What does the audit say now?",
    ),
    CatalogueLoop(
        "float16_autocast_overflows",
        float16_autocast,
        frozenset({"SCALER_SKIPPED_STEPS"}),
        "overflow",
        options={"scaler": True, "scheduler": True, "rtol": 3e-3},  # float16's rounding
        kind="note",
        question="PyTorch's float16 recipe; some scaled gradients overflow. What happens?",
    ),
    # bugs that hide: composed, silent, one line off, memory, data
    CatalogueLoop(
        "zero_grad_and_undivided",
        zero_grad_and_undivided,
        frozenset({"ZERO_GRAD_IN_WINDOW", "LOSS_NOT_DIVIDED"}),
        question="Two bugs at once. Which does the audit name?",
    ),
    CatalogueLoop(
        "zero_grad_before_step", zero_grad_before_step, frozenset({"ZERO_GRAD_BEFORE_STEP"})
    ),
    CatalogueLoop(
        "scheduler_before_optimizer",
        scheduler_before_optimizer,
        frozenset({"SCHEDULER_BEFORE_STEP"}),
        options={"scheduler": True},
    ),
    CatalogueLoop(
        "unscale_and_update_every_micro_batch",
        unscale_and_update_every_micro_batch,
        frozenset({"UNSCALE_MISUSE", "SCALER_MISUSE"}),
        options={"scaler": True},
        question="PyTorch raises nothing here. What did the optimizer see?",
    ),
    CatalogueLoop(
        "total_loss_keeps_graphs", total_loss_keeps_graphs, frozenset({"GRAPHS_KEPT_ALIVE"})
    ),
    CatalogueLoop(
        "logging_forward_with_grad",
        logging_forward_with_grad,
        frozenset({"FORWARD_WITHOUT_BACKWARD"}),
        kind="note",
    ),
    CatalogueLoop(
        "normalises_in_place",
        normalises_in_place,
        frozenset({"BATCH_MODIFIED", "UNEXPLAINED_GRADIENT"}),
    ),
    CatalogueLoop(
        "undivided_under_clipping",
        undivided_under_clipping,
        frozenset({"LOSS_NOT_DIVIDED"}),
        options={"max_norm": 1.0},
        question="Clipping bites at every step. Can the audit still see the missing ÷k?",
    ),
    CatalogueLoop(
        "undivided_under_clipping_float32",
        undivided_under_clipping,
        frozenset({"GRADIENT_NOT_VERIFIED"}),
        "float32",
        options={"max_norm": 1.0},
        question="The same loop in float32. Can the audit still see the missing ÷k?",
    ),
    CatalogueLoop("raises", raises, frozenset({"STEP_RAISED"}), kind="broken"),
    CatalogueLoop(
        "builds_its_own_optimizer", builds_its_own_optimizer, frozenset({"NO_STEPS"}), kind="broken"
    ),
    CatalogueLoop(
        "calls_model_forward", calls_model_forward, frozenset({"FORWARD_NOT_SEEN"}), kind="broken"
    ),
    CatalogueLoop(
        "replaces_a_layer", replaces_a_layer, frozenset({"MODEL_CHANGED"}), kind="broken"
    ),
    CatalogueLoop(
        "trains_until_perfect", trains_until_perfect, frozenset({"RUNAWAY_LOOP"}), kind="broken"
    ),
]
CATALOGUE: dict[str, CatalogueLoop] = {entry.name: entry for entry in _ENTRIES}
# exercise 08.1 asks to predict this loop's audit before running it: the explorer does not offer it
EXERCISE_LOOPS = ("mystery_loop",)


def catalogue_loop(name: str) -> CatalogueLoop:
    """The catalogue entry `name` (lesson 08's gallery): `.source`, `.audit()`, `.expected`."""
    one_of("name", name, CATALOGUE)
    return CATALOGUE[name]
