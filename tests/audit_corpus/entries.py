"""The corpus: each real loop, the setup it is audited on, and the verdict an expert gave after
reading the code, written down before the audit ran (lesson 08)."""

from collections.abc import Callable
from dataclasses import dataclass, field

import accumlab as al

from . import epochs, frameworks, plain


@dataclass(frozen=True)
class CorpusLoop:
    fn: Callable
    expected: frozenset  # the finding codes an expert predicts
    why: str  # the expert's reasoning, in one line
    setup: str = "regression"  # regression: 10 micro-batches, k = 4 (windows 4, 4, 2)
    options: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.fn.__name__

    def kwargs(self) -> dict:
        if self.setup == "regression8":  # 8 micro-batches, k = 4: no short window
            setup = al.audit.audit_setup(data=al.regression_data(n=32, features=4, seed=0))
        elif self.setup == "regression9":  # 9 micro-batches, k = 4: 18 in two epochs
            setup = al.audit.audit_setup(data=al.regression_data(n=36, features=4, seed=0))
        elif self.setup == "k1":
            setup = al.audit.audit_setup(accumulation_steps=1)
        else:
            setup = al.audit.audit_setup(self.setup)
        return {**setup, **self.options}


_CLIP = {"max_norm": 1.0}
_SCHED = {"scheduler": True}

CORPUS = [
    CorpusLoop(
        plain.pytorch_amp_docs,
        frozenset({"LAST_WINDOW_CARRIED"}),
        "steps only when (i + 1) % k == 0 and never zeroes before an epoch's first backward: "
        "micro-batches 9 and 10 join the next epoch's first step (6 micro-batches at 1/4 each)",
        options={"scaler": True},
    ),
    CorpusLoop(
        plain.forum_accumulation,
        frozenset({"LAST_WINDOW_DROPPED"}),
        "the same condition, but model.zero_grad() before each epoch's loop: the tail is dropped",
    ),
    CorpusLoop(
        plain.tutorial_undivided,
        frozenset({"LOSS_NOT_DIVIDED", "LAST_WINDOW_DROPPED"}),
        "the loss is never divided by k; the short last window never steps, and the "
        "optimizer.zero_grad() before the loop drops it",
    ),
    CorpusLoop(
        plain.nanogpt,
        frozenset(),
        "windows of exactly k, loss / k, unscale_ then clip once per window: correct",
        "regression8",
        {"scaler": True, **_CLIP},
    ),
    CorpusLoop(
        plain.llm_c,
        frozenset(),
        "zero, k micro-steps of loss / k, lossf accumulates detached values, clip, step",
        "regression8",
        _CLIP,
    ),
    CorpusLoop(
        plain.timm,
        frozenset(),
        "divides the short last window by its own size; clip and scheduler once per update",
        options={**_CLIP, **_SCHED},
    ),
    CorpusLoop(
        plain.transformers_trainer_v3,
        frozenset({"LAST_WINDOW_CARRIED"}),
        "steps at the end only when the whole epoch is shorter than k, and the function never "
        "zeroes before its first backward: the last 2 join the next epoch's first step",
        options={**_CLIP, **_SCHED},
    ),
    CorpusLoop(
        plain.run_squad_clip_every_backward,
        frozenset({"CLIP_PER_MICRO_BATCH", "LAST_WINDOW_CARRIED"}),
        "clip_grad_norm_ after every backward clips partial sums; the last window never steps "
        "and, never zeroed, joins the next epoch's first step",
        options={**_CLIP, **_SCHED},
    ),
    CorpusLoop(
        plain.h2o_llmstudio,
        frozenset({"OFF_BY_ONE_SCHEDULE", "SCHEDULER_PER_MICRO_BATCH"}),
        "itr % k == 0 steps after the first micro-batch; scheduler.step() every iteration",
        options={**_CLIP, **_SCHED},
    ),
    CorpusLoop(
        plain.swin_simmim,
        frozenset({"UNSCALE_MISUSE"}),
        "unscale_ after every backward: PyTorch raises at the second micro-batch",
        options={"scaler": True, **_CLIP},
    ),
    CorpusLoop(
        plain.pytorch_faq_total_loss,
        frozenset({"GRAPHS_KEPT_ALIVE"}),
        "total_loss += loss keeps every iteration's graph alive",
        "k1",
    ),
    CorpusLoop(
        plain.hf_mean_over_tokens,
        frozenset({"MEAN_OF_MEANS", "LAST_WINDOW_UNDERWEIGHTED"}),
        "per-micro-batch token means / k: unequal token counts, and the 1-batch last window / k",
        "tokens",
    ),
    CorpusLoop(
        plain.hf_num_items_in_batch,
        frozenset(),
        "summed token losses / the window's real tokens: every token weighs the same",
        "tokens",
    ),
    CorpusLoop(
        frameworks.accelerate_manual,
        frozenset({"LAST_WINDOW_CARRIED"}),
        "Accelerator() without accumulation: the hand-written (index + 1) % k never steps on the "
        "tail, and nothing zeroes it (prepare does not): it joins the next epoch's first step",
        options=_SCHED,
    ),
    CorpusLoop(
        frameworks.accelerate_accumulate,
        frozenset({"LAST_WINDOW_UNDERWEIGHTED"}),
        "backward divides by k always; the prepared loader makes the last batch step",
        options=_SCHED,
    ),
    CorpusLoop(
        frameworks.accelerate_examples_space,
        frozenset({"ZERO_GRAD_IN_WINDOW", "LAST_WINDOW_UNDERWEIGHTED"}),
        "zero_grad runs for real on each window's last micro-batch, erasing the others",
        options=_SCHED,
    ),
    CorpusLoop(
        frameworks.accelerate_issue_641,
        frozenset({"ZERO_GRAD_IN_WINDOW", "LAST_WINDOW_UNDERWEIGHTED"}),
        "as above; clipping every micro-step changes nothing once one micro-batch survives",
        options={**_CLIP, **_SCHED},
    ),
    CorpusLoop(
        frameworks.lightning_accumulate_grad_batches,
        frozenset({"LAST_WINDOW_UNDERWEIGHTED"}),
        "every loss / accumulate_grad_batches, and a step on the epoch's last batch",
    ),
    CorpusLoop(
        frameworks.lightning_manual,
        frozenset({"LAST_WINDOW_DROPPED"}),
        "the documented manual loop steps only when (batch_idx + 1) % N == 0. Audited over one "
        "epoch: a second Trainer.fit (one per call) sets the gradients to None first, while one "
        "two-epoch fit carries the tail into epoch 2's first step (tests/test_audit_epochs.py "
        "measures both), so two calls would not show what one fit does",
        options={"epochs": 1},
    ),
    CorpusLoop(
        epochs.FastaiGradientAccumulation,
        frozenset({"WINDOWS_CROSS_EPOCHS"}),
        "count is reset in before_fit only and nothing zeroes at an epoch's start: each epoch's "
        "last 2 micro-batches and the next epoch's first 2 make one whole window",
    ),
    CorpusLoop(
        epochs.MMEngineOptimWrapper,
        frozenset({"WINDOWS_CROSS_EPOCHS"}),
        "_inner_count runs across epochs, each loss / k, a step every k: whole windows across "
        "the epoch boundary",
    ),
    CorpusLoop(
        epochs.MMEngineRunEndsInsideAWindow,
        frozenset(),
        "9 micro-batches an epoch, 18 in the run, k = 4: windows across epochs, and the run's "
        "last 2 divided by 2 (_remainder_counts) and stepped at _max_counts: the carry policy",
        setup="regression9",
        options={"last_window": "carry"},
    ),
    CorpusLoop(
        epochs.espnet2_train_one_epoch,
        frozenset({"LAST_WINDOW_CARRIED"}),
        "iiter restarts each epoch and nothing zeroes first: the next epoch's first step adds "
        "the 2 left over, 6 micro-batches at 1/4 each (clipping at 100 never bites)",
        options={"max_norm": 100.0},
    ),
    CorpusLoop(
        epochs.YOLOv5Train,
        frozenset({"CARRIED_WINDOW_ZEROED", "LOSS_NOT_DIVIDED"}),
        "ni and last_opt_step run across epochs, but optimizer.zero_grad() opens every epoch: "
        "the window that began at epoch 1's end loses its first 2 micro-batches; the loss is "
        "scaled by the batch size and never divided by accumulate",
        options={"scaler": True},
    ),
]
