"""The words of every finding, as data: a template per finding code, filled with measured values
(lesson 08). Detection lives in the detector modules; changing a sentence never touches them.

A template is a `str.format` string; a code with several situations maps variant names to
templates, and `message(code, variant, **fields)` picks one. The findings about epochs live in
`messages_epochs.py`; pieces several findings share, in `phrases.py`.
"""

from __future__ import annotations

from .messages_epochs import EPOCH_MESSAGES
from .messages_epochs import LAST_WINDOW_FIX as _LAST_WINDOW_FIX

MESSAGES: dict[str, str | dict[str, str]] = {
    # ------------------------------------------------------------------ could not be audited
    "RUNAWAY_LOOP": {
        "time": (
            "Your function was still running after {limit} (it had made {forwards} forward passes "
            "and {steps} optimizer steps for {micro_batches} micro-batches), so the audit stopped "
            "it{where}. Does the loop end?"
        ),
        "forwards": (
            "Your function ran {limit} forward passes for {micro_batches} micro-batches, so the "
            "audit stopped it{where}. Does the loop end?"
        ),
        "steps": (
            "Your function called optimizer.step() {limit} times for {micro_batches} "
            "micro-batches, so the audit stopped it{where}. Does the loop end?"
        ),
        "calls": (
            "Your function called {what} {limit} times for {micro_batches} micro-batches, so the "
            "audit stopped it{where}. Does the loop end?"
        ),
    },
    "STEP_RAISED": (
        "Your function raised {error}{where}{when}. Nothing after that could be audited."
    ),
    "MODEL_CHANGED": (
        "After your function ran, the model's parameters no longer have the same names and shapes "
        "({changes}). A training loop updates values, it does not replace layers: the audit "
        "cannot compare gradients."
    ),
    "NO_STEPS": {
        "no_forward": (
            "Your function never ran the model on the micro-batches it was given, so nothing was "
            "trained."
        ),
        "no_step": (
            "Your function ran {forwards} forward passes but never called optimizer.step() on the "
            "optimizer it was given (did it build its own?), so nothing was trained."
        ),
    },
    "FORWARD_NOT_SEEN": (
        "{count} backward pass(es) put gradient into the parameters through a graph that no call "
        "of the model built (the first added a gradient of norm {norm:.3g}): model.forward(x), "
        "a submodule called directly, or a loss computed from the parameters alone. The audit sees a forward only when the model itself is "
        "called, model(x), so it cannot tell which micro-batches that gradient came from. Call "
        "model(x)."
    ),
    "NON_FINITE": (
        "The first non-finite value appeared {where}. From there on the gradients are NaN or "
        "infinite and cannot be compared{compared}."
    ),
    # ------------------------------------------------------------------ when the optimizer stepped
    "STEP_EVERY_MICRO_BATCH": (
        "optimizer.step() ran after every micro-batch: {seen} steps for {micro_batches} "
        "micro-batches instead of {expected}, so nothing was accumulated; the first step's micro-batch "
        "{weight}. Step only when a window of k = {k} micro-batches (or the epoch) is complete."
    ),
    "OFF_BY_ONE_SCHEDULE": (
        "Your loop stepped after micro-batches {seen} (counting from 1), the reference after "
        "{expected}: your steps fall {shift} off the multiples of k = {k}. Counting from 0, your "
        "step condition is true at micro-batches {seen0}; it must be true at {expected0}, the last "
        "micro-batch of "
        "each window of k = {k} and the epoch's last one: with a counter i from enumerate(batches) "
        "that is (i + 1) % k == 0 or i == len(batches) - 1; with enumerate(batches, 1) it is "
        "i % k == 0 or i == len(batches). {first}{leftover}"
    ),
    "UNEXPLAINED_SCHEDULE": (
        "The optimizer stepped after a pattern of micro-batches the audit does not recognise "
        "(seen {seen}, reference {expected}); the micro-batches first forwarded between steps "
        "were {windows}.{leftover}"
    ),
    "LAST_WINDOW_KEPT": (
        'You stated last_window="drop", but your loop also stepped on the short last window '
        "({size} micro-batch(es)); {weight}. Either drop it (step only after full windows and zero "
        "the leftover gradient) or audit with the policy you use."
    ),
    # ------------------------------------------------------------------ what each step's gradient was
    "UNEXPLAINED_GRADIENT": (
        "At {count} of {compared} compared optimizer steps the gradient the optimizer saw differs "
        "from the reference, and no combination of the known bugs reproduces it. First at step "
        "{step}: {diff}.{why}"
    ),
    "GRADIENT_NOT_VERIFIED": {
        "clipping": (
            "At step(s) {steps} clipping shortened the gradient (its norm before clipping, "
            "{norm:.3g}, is above max_norm = {max_norm:g}), so the optimizer sees a gradient "
            "max_norm long whatever the loss's scale: a loop with {options} gives the same update "
            "within this dtype's tolerance (rtol = {rtol:g}), and the audit cannot tell which it "
            "is. To verify the scale, audit once with max_norm above {suggest:.3g} (then clipping "
            "does not bite) or without clipping."
        ),
        "resolution": (
            "At step(s) {steps} several explanations ({options}) all match the measured gradient "
            "within this dtype's tolerance (rtol = {rtol:g}), so the audit cannot tell which it "
            "is. Audit a float64 copy of the model to tell them apart."
        ),
    },
    "LOSS_DIVIDED_TWICE": (
        "Each window's gradient was divided twice: the loss by the window's size, then the "
        "gradient again, as p.grad /= n does (or both times by k). ‖seen‖ / ‖reference‖ = "
        "{ratios} for windows of {sizes} micro-batches, where one division gives 1. Divide once: "
        "the loss, or the gradient, not both."
    ),
    "LOSS_NOT_DIVIDED": (
        "Each micro-batch's loss reaches backward without being divided by the number of "
        "micro-batches in its window, so each micro-batch's gradient enters at full weight: a "
        "window's gradients add up instead of averaging. "
        "Divide each loss by the window's size (or sum the item losses and divide by the "
        "window's item count)."
    ),
    "ZERO_GRAD_IN_WINDOW": (
        "Gradients are zeroed inside the window, so the micro-batches before each zero_grad are "
        "erased ({zeros} zero_grad call(s) between the forwards of step {step}'s window). Zero "
        "once per window, right after optimizer.step()."
    ),
    "GRADS_NEVER_ZEROED": (
        "Gradients are not zeroed after optimizer.step(), so each step also carries the earlier "
        "windows' gradients. Call optimizer.zero_grad() after every optimizer.step()."
    ),
    "ZERO_GRAD_BEFORE_STEP": (
        "zero_grad() ran after the window's last backward and before optimizer.step(), so the "
        "optimizer saw a zero gradient at step(s) {steps} and {moved}. Zero right after "
        "optimizer.step() (or before the window's first backward) instead."
    ),
    "MEAN_OF_MEANS": (
        "Each micro-batch's loss is averaged over its own items, then the window averages those "
        "means, so an item in a small micro-batch weighs more than one in a big one (items per "
        "micro-batch at step {step}: {counts}). Sum the item losses and divide by the window's "
        "total number of items."
    ),
    "LAST_WINDOW_UNDERWEIGHTED": (
        "The short last window ({size} of k = {k} micro-batches) is divided by k, so its step's "
        "gradient is {size}/{k} = {weight:.3g} of the window's mean: with micro-batches of equal "
        "size each of its samples weighs what a sample of a full window weighs, and the step is "
        "{weight:.3g} times as long as a full window's. This is a documented policy, not a slip: "
        "Hugging Face Accelerate (Accelerator.backward divides every loss by "
        "gradient_accumulation_steps) and PyTorch Lightning (every loss divided by "
        "accumulate_grad_batches, with a step at the epoch's last batch) do the same."
        + _LAST_WINDOW_FIX
        + " To make every step the mean of its own window instead (the short window's samples "
        "then weigh {k}/{size} times as much as the others), divide by the number of "
        "micro-batches actually in the window, as the Transformers Trainer does for a model that "
        "takes no num_items_in_batch when no compute_loss_func is given."
    ),
    "LAST_WINDOW_AVERAGED": (
        'You stated last_window="divide_by_k", but the short last window ({size} of k = {k} '
        "micro-batches) was averaged over what it holds: its samples weigh {k}/{size} = "
        "{weight:.3g} times what the stated policy gives them." + _LAST_WINDOW_FIX
    ),
    "CLIPPED_ANOTHER_WAY": {
        verdict: (
            "Clipping (max_norm = {max_norm:g}) bit at every step, and your updates differ from "
            "clip_grad_norm_'s only by its 1e-6 epsilon (at most {rel:.2g} relative; "
            "clip_grad_norm_ multiplies by max_norm / (norm + 1e-6)): clipping computed another "
            "way, by hand (max_norm / norm) or with clip_grad_norm_ on still-scaled gradients and "
            "max_norm × scale. That is not a bug, but a clip that bites hides the loss's scale, so "
            "the audit ran your loop once more with max_norm = {unbitten:g}, where clipping does "
            "not bite: " + result
        )
        for verdict, result in (
            ("clean", "there every step matched the reference."),
            ("found_bugs", "the other findings were measured there."),
        )
    },
    "CLIP_PER_MICRO_BATCH": (
        "Gradients were clipped inside the window, on partial sums, instead of once after the "
        "last backward (max_norm = {max_norm:g}): the direction changes, not only the length. "
        "Clip once, right before optimizer.step()."
    ),
    "NOT_CLIPPED": (
        "The audit asked for max_norm = {max_norm:g}, but the optimizer saw a gradient of norm "
        "{norm:.4g} at step {step}: it was never clipped. Clip once per window, right before "
        "optimizer.step()."
    ),
    "UNSCALE_MISUSE": {
        "raised": (
            "scaler.unscale_(optimizer) was called again before scaler.update(), which PyTorch "
            "refuses ({error}). Call unscale_ once per optimizer step: after the window's last "
            "backward, right before clipping and scaler.step."
        ),
        "clip_before_unscale": (
            "clip_grad_norm_ ran on gradients still multiplied by the GradScaler's scale "
            "({scale:g}), so it clipped to max_norm / scale = {threshold:.3g} instead of "
            "{max_norm:g}. Call scaler.unscale_(optimizer) once, right before clipping."
        ),
        "inside_window": (
            "scaler.unscale_(optimizer) ran before the window's last backward, so the gradients "
            "already in .grad were divided by the scale and the later micro-batches were added "
            "still multiplied by it: at step {step} the window's micro-batches entered with "
            "weights {mults} instead of 1. Call unscale_ once per window, after its last backward."
        ),
    },
    "SCALER_MISUSE": {
        "raised": (
            "{where}() raised {error}. The order per window is: scaler.scale(loss).backward() for "
            "every micro-batch, then unscale_, clip, scaler.step, scaler.update once."
        ),
        "not_unscaled": (
            "optimizer.step() ran on gradients still multiplied by the GradScaler's scale "
            "({scale:g}): nothing unscaled them. Call scaler.step(optimizer), which unscales first "
            "(and skips the step on inf/NaN), then scaler.update()."
        ),
        "update_inside": (
            "scaler.update() ran inside the window. The audit's GradScaler (growth_interval=1) "
            "changes its scale at every update(), so the micro-batches entered the step with "
            "weights {mults} instead of 1. One with PyTorch's defaults changes it whenever it "
            "grows (after growth_interval = 2000 updates without inf) or backs off (after an "
            "inf), and then the micro-batches before and after that update() enter with "
            "different weights. Call update() once per window, right after "
            "scaler.step(optimizer)."
        ),
    },
    "SCALER_STEP_SKIPPED": (
        "optimizer.step() ran without scaler.step(optimizer) at step(s) {steps}{unscaled}: the "
        "GradScaler's own inf/NaN check, which skips an update whose scaled gradients "
        "overflowed, did not run there: one micro-batch whose scaled gradient overflows then "
        "writes inf or NaN into every weight it reaches, where scaler.step would have skipped "
        "that update (scaler.update(), where it runs, lowers the scale either way). Call "
        "scaler.step(optimizer) in place of optimizer.step(), even where your loop checks for "
        "inf/NaN itself: the audit reports every step that bypasses scaler.step."
    ),
    "SCALER_SKIPPED_STEPS": (
        "At step(s) {steps} of {total} the scaled gradients held inf or NaN, so scaler.step "
        "skipped optimizer.step() (the parameters did not move) and scaler.update() lowered the "
        "scale (it was {scales} at those steps). That is what a GradScaler does, not a bug; those steps are not compared "
        "with the reference, the others are.{scheduled}"
    ),
    # ------------------------------------------------------------------ the learning-rate schedule
    "SCHEDULER_PER_MICRO_BATCH": (
        "scheduler.step() ran {per_window} times per full window of k = {k} micro-batches, so the "
        "schedule advances {per_window}× too fast ({calls} calls for {steps} optimizer steps over "
        "the run): the learning rate at step {step} was {seen:.4g} instead of {expected:.4g}. "
        "Step the scheduler once, right after each optimizer.step()."
    ),
    "SCHEDULER_BEFORE_STEP": (
        "scheduler.step() ran before optimizer.step() in each window, so the first optimizer step "
        "already used the schedule's second value ({seen:.4g} instead of {expected:.4g}) and the "
        "schedule's first value is never used{warned}. Call scheduler.step() right after "
        "optimizer.step()."
    ),
    "SCHEDULER_STEPS_WRONG": (
        "scheduler.step() ran {calls} times for {steps} optimizer steps (calls before each "
        "step, and after the last: {between}), not once per optimizer step: the learning rate at step "
        "{step} was {seen:.4g} instead of {expected:.4g}. Step the scheduler once, right after "
        "each optimizer.step()."
    ),
    # ------------------------------------------------------------------ memory and data
    "GRAPHS_KEPT_ALIVE": (
        "Autograd graphs of earlier windows were still alive at later optimizer steps ({alive} at "
        "steps {steps}): something in the loop keeps a reference to a loss that still has its "
        "graph, such as total_loss += loss. {held} The graphs grow with every window for as long as "
        "the loop keeps that reference. Accumulate a number instead: total_loss += loss.item() (or loss.detach())."
    ),
    "FORWARD_WITHOUT_BACKWARD": (
        "{count} forward pass(es) ran with gradients on but backward never reached their graph "
        "(micro-batches {batches}): a logging or evaluation forward? Each built a graph and saved "
        "activations for a backward that never came; under torch.no_grad() it would build none. "
        "The audit counts each micro-batch once."
    ),
    "BATCH_MODIFIED": (
        "Your loop changed micro-batch(es) {batches} in place (their inputs or targets differ "
        "after the run). Where the micro-batches are views of the data set's tensors (slices of "
        "one stored tensor, as a DataLoader with batch_size=None over them hands out), that "
        "changes the data set itself, and the next epoch trains on the changed values; a "
        "DataLoader that collates samples (batch_size=N) hands out new tensors. The audit handed "
        "your loop copies, so your data is untouched here. Compute on new tensors (x * 2, not "
        "x.mul_(2))."
    ),
    "AUTOCAST_DISABLED": {
        "warned": "PyTorch switched torch.autocast off in your loop (it warned: “{warning}”), so ",
        # CUDA present: torch.autocast("cuda") is on, but casts only CUDA tensors, and warns nothing
        "idle": (
            'torch.autocast("cuda") was on around {forwards} forward(s) whose inputs were on the '
            "CPU, where it casts nothing, so "
        ),
        "then": (
            "the forward ran in the model's {dtype}: the audit checked the loop's accumulation, not "
            "what a lower precision does to it (rounding, overflows the GradScaler must skip). "
            "The audit cannot run a loop on a GPU: where yours runs under CUDA autocast, compare a "
            "few of its steps against a float32 run there; on the CPU, "
            'torch.autocast("cpu", dtype=torch.bfloat16) runs a lower precision on a float32 model.'
        ),
    },
    "BATCHNORM_STATS": (
        "The model has BatchNorm in training mode: each micro-batch is normalised with its own "
        "mean and variance, so even a correct loop cannot reproduce the big batch's gradient "
        "(relative difference {rel_l2:.3g} at step {step}), and the running statistics were "
        "updated {updates} times before the first optimizer step, leaving the old statistics a "
        "weight of (1 − {momentum})^{updates} = {kept:.3g} instead of {one:.3g}. Lesson 04 shows "
        "the remedies (GroupNorm/LayerNorm, frozen BN)."
    ),
}


MESSAGES.update(EPOCH_MESSAGES)


def message(code: str, variant: str | None = None, /, **fields) -> str:
    """The sentence for finding `code` (one of its variants), filled with the measured `fields`."""
    template = MESSAGES[code]
    if isinstance(template, dict):
        template = template[variant]
    return template.format(**fields)
