"""Exercise 11.3's judge of one run of the learner's Accelerate epoch: every accelerator.backward
call against its micro-batch's share of its window, where the window syncs, when the optimizer and
the scheduler step. The windows are those of the order the epoch trained in: on a loader that
reshuffles on every pass, each pass has its own."""

from __future__ import annotations

import math

EXACT = 1e-10  # float64 round-off on these problems is ~1e-16 (measure.EXACT)
EXACT_FLOAT32 = 1e-5  # where the learner's loss is float32 (measure.EXACT_FLOAT32)


def tolerance(dtypes) -> float:
    import torch

    return EXACT_FLOAT32 if torch.float32 in set(dtypes) else EXACT


def tolerance_words(tol: float) -> str:
    return f"a relative {tol:.0e}" + (" (your loss is float32)" if tol == EXACT_FLOAT32 else "")


def worst_step(run) -> tuple[float, list]:
    from ..frameworks.measure import check_run

    checks = check_run(run)
    return max((c.grad_error for c in checks), default=math.inf), checks


def share_hint(n: int, share: dict, k: int) -> str:
    if share["micro_batch"] is None:
        return (
            f"accelerator.backward call {n} came before any forward: each call carries the loss "
            "of one micro-batch"
        )
    return (
        f"accelerator.backward call {n} added ×{share['scale']:.3g} of micro-batch "
        f"{share['micro_batch']}'s share of its window's gradient (Σ its token losses ÷ the "
        f"window's real tokens). Each call must add its own share as it runs: accelerator.backward "
        f"divides what it is given by k = {k}, and a .grad rescaled afterwards (at the sync) is "
        "not what this exercise checks"
    )


def trained_windows(run) -> list[tuple]:
    """The windows of one big batch per window over the micro-batches in the order the run first
    forwarded them: the problem's windows for an unshuffled loader, a shuffled pass's otherwise."""
    order = [i for i in dict.fromkeys(run.forwards) if i is not None]
    k = run.problem.k
    return [tuple(order[i : i + k]) for i in range(0, len(order), k)]


def judge_epoch(run) -> str | None:
    """11.3's checks of one run of the learner's epoch: None when every step is exact."""
    from ..frameworks.measure import backward_shares

    problem = run.problem
    micro_batches = len(problem.micro_batches())
    calls = run.extra.get("backward_calls", [])
    if run.extra.get("outside_backward"):
        return (
            "gradients were accumulated by a backward pass outside accelerator.backward (a "
            "loss.backward()?): the exercise is about Accelerate's backward, and its ÷ k"
        )
    if len(calls) != micro_batches:
        return (
            f"accelerator.backward ran {len(calls)} times for {micro_batches} micro-batches: "
            "once per micro-batch, each carrying that micro-batch's loss"
        )
    outside = sum(not c["in_accumulate"] for c in calls)
    if outside:
        return (
            f"{outside} of the {len(calls)} accelerator.backward calls ran outside `with "
            "accelerator.accumulate(model):` — this exercise keeps accumulate(), which with "
            "several processes is what skips the all-reduce of a window's other micro-batches"
        )
    if run.extra.get("forwards_outside_accumulate"):
        return (
            f"{run.extra['forwards_outside_accumulate']} forward passes ran outside `with "
            "accelerator.accumulate(model):` — on several processes DDP skips the all-reduce only "
            "when the forward runs inside it too"
        )
    if run.extra.get("accumulate_without_model"):
        return (
            "accelerator.accumulate() was not given the prepared model: without it no "
            "model.no_sync() is entered, and every micro-batch would be all-reduced"
        )
    if any(c["num_steps"] != problem.k for c in calls):
        return (
            f"the Accelerator's number of accumulation steps was changed from k = {problem.k}: "
            "keep the configured k and let accumulate() count the window"
        )
    tol = tolerance(c["dtype"] for c in calls)
    windows = trained_windows(run)
    shares = backward_shares(problem, calls, windows)
    for n, share in enumerate(shares, start=1):
        if share["error"] > tol:
            return share_hint(n, share, problem.k)
    last = {w[-1] for w in windows}
    # a no_sync opened outside accumulate() holds for every backward inside it: on several
    # processes the window's last micro-batch is then never all-reduced
    unsynced = [
        n
        for n, (call, share) in enumerate(zip(calls, shares), start=1)
        if call.get("in_no_sync") and share["micro_batch"] in last
    ]
    if unsynced:
        return (
            f"accelerator.backward call {unsynced[0]}, the last micro-batch of its window, ran "
            "inside an `accelerator.no_sync(model)` of your own: on several processes that "
            "window would never be all-reduced — accumulate() alone decides which micro-batches "
            "sync"
        )
    # accumulate() enters no_sync from sync_gradients as it is entered, and any open one that
    # entered it holds it: a value set by hand later in the block changes what the optimizer
    # does, not which micro-batches are all-reduced
    entered = [
        (n, share["micro_batch"] in last, len(call["entry_sync"]) > 1)
        for n, (call, share) in enumerate(zip(calls, shares), start=1)
        if call.get("entry_sync") and all(call["entry_sync"]) != (share["micro_batch"] in last)
    ]
    if entered:
        n, is_last, nested = entered[0]
        return (
            f"accelerator.sync_gradients was {not is_last} when "
            + ("an outer " if nested and is_last else "")
            + f"`accelerator.accumulate(model)` was entered for accelerator.backward call {n}, "
            + (
                "the last micro-batch of its window: accumulate() entered no_sync, so on several "
                "processes the window would never be all-reduced"
                if is_last
                else "which is not the last micro-batch of its window: accumulate() did not "
                "enter no_sync, so on several processes it would be all-reduced"
            )
            + " — accumulate() decides on entry; setting sync_gradients later inside it does not "
            "change that"
        )
    synced = [
        n
        for n, (call, share) in enumerate(zip(calls, shares), start=1)
        if call["sync_gradients"] and share["micro_batch"] not in last
    ]
    if synced:
        return (
            f"accelerator.sync_gradients was True during accelerator.backward call {synced[0]}, "
            "which is not the last micro-batch of its window: on several processes it would be "
            "all-reduced — only a window's last micro-batch syncs"
        )
    if [s.window for s in run.steps] != windows:
        return (
            f"the optimizer stepped after micro-batches {[s.end for s in run.steps]}; one big "
            f"batch per window steps after {[w[-1] + 1 for w in windows]} — when does "
            "accumulate() sync? (the lesson's prefetch cell in section 3.1 measures it)"
        )
    worst, checks = worst_step(run)
    wrong_lr = [c for c in checks if not math.isclose(c.lr, c.expected_lr, rel_tol=1e-9)]
    if wrong_lr or len(run.scheduler_steps) != len(run.steps):
        c = wrong_lr[0] if wrong_lr else checks[-1]
        return (
            f"the scheduler stepped {len(run.scheduler_steps)} times for {len(run.steps)} "
            f"optimizer steps (step {c.step + 1} ran at lr {c.lr:.3g}, the schedule's is "
            f"{c.expected_lr:.3g}): once per optimizer step"
        )
    if worst <= tol:
        return None
    zero = [c.step + 1 for c in checks if c.grad_norm == 0.0]
    if zero:
        return (
            f"optimizer step {zero[0]} used a zero gradient: were the gradients cleared between "
            "the window's last backward and optimizer.step()?"
        )
    return f"off by up to {worst:.1e} of the reference gradient (exact: {tolerance_words(tol)})"
