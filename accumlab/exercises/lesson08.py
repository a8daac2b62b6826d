"""Lesson 08 exercises: fix a loop from what its code and its audit show, then write loops the
audit passes.

Each takes a training loop and judges it by running it under `al.audit`, which observes how it
computed: which micro-batches each forward used, when the optimizer stepped, what gradient each
step saw, every GradScaler and scheduler call. A loop that calls accumlab's own reference or one of
the lesson's catalogue loops instead of accumulating is refused.
"""

from __future__ import annotations

import random

from ..audit import audit, audit_setup
from ..audit.explain import CLIPPED_AT
from ..audit.findings import _fmt
from . import exercise
from ._calls import audit_loops
from ._draws import fresh_rng
from ._observe import Hint, Refuse

# accumlab's own references: an answer must accumulate, not copy their gradient or trajectory
REFERENCES = ("al.full_batch_grads", "al.accumulated_grads", "al.run", "al.precision.amp_train")


@exercise("08.1", 1, "Fix the mystery loop")
def _fixed_mystery(answer):
    # the mystery loop's own setup (windows of 4, 4 and 2), then k and the data drawn at random:
    # a fix with window sizes typed in (even a table over k) does not divide by its own
    rng = fresh_rng()
    drawn = _data(
        rng, micro_batches="equal", micro_batch_size=4, accumulation_steps=rng.choice((3, 6, 7))
    )
    return _observed(answer, "regression") or _observed(answer, "regression", **drawn)


# notes a right loop may get: its clip computed another way (measured where it cannot bite),
# torch.autocast("cuda") switched off on this CPU, updates GradScaler skipped for an overflow
ACCEPTED = frozenset({"CLIPPED_ANOTHER_WAY", "AUTOCAST_DISABLED", "SCALER_SKIPPED_STEPS"})
UNBITTEN = 1e3  # a max_norm far above every gradient norm of these setups: clipping never bites


def _observed(answer, setup: str, **options) -> str | None:
    """Run the answer under the audit; None when the report is clean, else what was observed."""
    if not callable(answer):
        raise Hint("answer with a function train_epoch(model, optimizer, batches, k, ...)")
    with Refuse(*REFERENCES):
        report = audit(answer, **_setup(setup, options))
        found = [f for f in report.findings if f.code not in ACCEPTED]
        unclipped = ""
        if found and CLIPPED_AT in found[0].evidence:
            # the clip set every update's length (ratio 1): show the scale where it cannot bite
            wide = {**options, "max_norm": UNBITTEN}
            again = audit(answer, **_setup(setup, wide))
            seen = [f for f in again.findings if f.code not in ACCEPTED]
            if seen and _not_one(seen[0]):
                report, found, options = again, seen, wide
                unclipped = (
                    f"; measured with max_norm = {UNBITTEN:g}, where clipping does not bite: at "
                    f"max_norm = {CAPSTONE['max_norm']:g} every update is max_norm long, so "
                    "‖seen‖ / ‖reference‖ is 1 there"
                )
        if not found and not report.foreign_gradient and options.get("max_norm") is not None:
            # a clip that bites rescales .grad and hides how much the passes carried: look
            # again where it cannot bite
            wide = audit(answer, **_setup(setup, {**options, "max_norm": UNBITTEN}))
            report.foreign_gradient = wide.foreign_gradient
    if report.graphs_together > 1:
        return (
            f"your loop kept the graphs of {report.graphs_together} forwards alive together and "
            "backpropagated them at once: that is the big batch's memory, not accumulation. Call "
            "backward on each micro-batch's loss right after its forward, so one graph at a time "
            "is alive"
        )
    if not found and report.foreign_gradient:
        return (
            f"the audit found the right gradients, but not from your loop's accumulation: "
            f"{report.foreign_gradient}. Accumulate on `model` itself: each micro-batch's "
            "backward adds its own gradient into .grad, and the step uses what they added"
        )
    if not found:
        _not_the_gallerys(answer, setup, options)
        return None
    first = found[0]
    steps = len(report.expected_steps)
    if first.code == "UNEXPLAINED_SCHEDULE" and report.seen_steps == tuple(range(1, steps + 1)):
        # one forward before each of the right number of steps: each forward took a window
        return (
            f"your loop ran one forward before each of its {steps} optimizer steps, where "
            f"accumulation runs one per micro-batch ({report.micro_batches} per epoch): a forward "
            "over a whole window's rows is the big batch, not accumulation. Run one forward and "
            "one backward per micro-batch"
        )
    measured = "; ".join(f"{k} {_fmt(v)}" for k, v in list(first.evidence.items())[:2])
    others = [f.code for f in found[1:]]
    also = f"; also {', '.join(others)}" if others else ""
    return (
        f"the audit ran your loop for {report.epochs} epochs of {report.micro_batches} "
        f"micro-batches (k = {report.accumulation_steps}) and reports {first.code} "
        f"({first.title}; measured: {measured}{unclipped}){also}. al.audit(your_loop, "
        f"**al.audit.audit_setup({setup!r}{_options(options)})) shows the whole report"
    )


def _not_the_gallerys(answer, setup: str, options: dict) -> None:
    """A loop the audit passes must not be one of the lesson's gallery loops (correct_loop is
    08.1's fix looked up, not written). Judged only once the audit is clean: a wrong fix that
    happens to be written as a gallery bug is answered with its finding, not with a refusal."""
    with Refuse(*audit_loops()):
        audit(answer, **_setup(setup, options))


def _not_one(finding) -> bool:
    """The finding's ‖seen‖ / ‖reference‖ differs from 1 somewhere: the scale is visible."""
    ratios = finding.evidence.get("‖seen‖ / ‖reference‖", [])
    return any(abs(r - 1) >= 1e-3 for r in ratios)


def _options(options: dict) -> str:
    """The options as the hint's al.audit.audit_setup(...) call writes them."""
    shown = {k: v for k, v in options.items() if k not in ("samples", "data_seed")}
    data = ""
    if "samples" in options:
        data = (
            f", data=al.regression_data(n={options['samples']}, features=4, "
            f"seed={options['data_seed']})"
        )
    return data + "".join(f", {k}={v!r}" for k, v in shown.items())


def _data(rng: random.Random, *, micro_batches: str, **fixed) -> dict:
    """A data set of 30–60 samples drawn at random (and its seed) for the micro-batch size and k
    in `fixed` (k = 4 unless given), whose last window is short, holds more than one micro-batch
    and another number than 40 samples would give: a count computed from the first setup's 40, or
    listed per k, fails.
    `micro_batches`: "equal" (every micro-batch full, as 08.1's and 08.3's loops assume) or
    "short" (the last one short, and by another remainder than 40's)."""
    size, k = fixed["micro_batch_size"], fixed.get("accumulation_steps", 4)

    def shape(n: int) -> tuple[int, int]:
        return -(-n // size) % k or k, n % size  # last window's micro-batches, last's remainder

    for n in rng.sample(range(30, 61), 31):
        last_window, remainder = shape(n)
        short = remainder and remainder != shape(40)[1]
        # a short last window, so a count typed in for full ones fails; never of one micro-batch,
        # which cannot tell ÷ 1 from no division (the audit cannot verify it)
        if last_window in (1, k, shape(40)[0]):
            continue
        if short if micro_batches == "short" else not remainder:
            return {"samples": n, "data_seed": rng.randint(1, 999), **fixed}
    raise ValueError(f"no data size in 30–60 suits micro_batch_size={size}, k={k}")


def _setup(setup: str, options: dict) -> dict:
    """audit_setup's keywords, with `samples` and `data_seed` turned into the data set they name."""
    from ..data import regression_data

    options = dict(options)
    if "samples" in options:
        n, seed = options.pop("samples"), options.pop("data_seed")
        options["data"] = regression_data(n=n, features=4, seed=seed)
    return audit_setup(setup, **options)


@exercise("08.2", 2, "Micro-batches of unequal size: every sample weighs the same")
def _sample_loop(answer):
    # then a data set, micro-batch size and short last micro-batch drawn at random: a loop that
    # divides by counts typed in is not dividing by its window's samples
    rng = fresh_rng()
    drawn = _data(rng, micro_batches="short", micro_batch_size=rng.choice((3, 5, 7)))
    return _observed(answer, "uneven") or _observed(answer, "uneven", **drawn)


CAPSTONE = {"max_norm": 0.5, "scheduler": True, "scaler": True}


@exercise("08.3", 3, "Capstone: accumulation + GradScaler + clipping + scheduler")
def _full_loop(answer):
    # then a data set, micro-batch size and k drawn at random: a loop with window sizes typed in
    # does not divide by its own window's
    rng = fresh_rng()
    size, k = rng.choice(((4, 3), (3, 5), (4, 5), (5, 5)))  # each leaves a short last window
    drawn = _data(rng, micro_batches="equal", micro_batch_size=size, accumulation_steps=k)
    return _observed(answer, "regression", **CAPSTONE) or _observed(
        answer, "regression", **drawn, **CAPSTONE
    )
