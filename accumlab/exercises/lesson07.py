"""Lesson 07 exercises: DDP/FSDP gradient sync under accumulation."""

from __future__ import annotations

import math

from . import exercise


@exercise("07.1", 1, "All-reduce rounds per optimizer step")
def rounds(answer):
    """answer = (rounds without no_sync, rounds with no_sync on the first k-1) for k = 8."""
    if not isinstance(answer, tuple) or len(answer) != 2:
        return "give a tuple of two integers: (without no_sync, with no_sync)."
    without, with_ = answer
    if without != 8:
        return "without no_sync, how many backward passes does one optimizer step run, and which of them sync?"
    if with_ != 1:
        return "with no_sync, which micro-steps' backward still all-reduces?"
    return None


@exercise("07.2", 2, "Which loops sync once, on the last micro-step?")
def which_loops(answer):
    """answer = the letters of the loops that all-reduce once per optimizer step, on its last
    micro-step (see the notebook)."""
    if isinstance(answer, str):
        letters = {c for c in answer.upper() if c.isalpha()}
    elif isinstance(answer, (set, list, tuple)):
        letters = {str(c).upper() for c in answer}
    else:
        letters = None
    if letters is None or not letters <= set("ABCD"):
        return "answer with a string or set of letters among A, B, C, D."
    if "A" in letters or "D" in letters:
        return "DDP decides whether a backward will all-reduce when the FORWARD runs; look at where each loop sets or enters no_sync."
    if letters != {"B", "C"}:
        return "more than one loop is right: the context manager and the flag it sets are two spellings of the same thing."
    return None


def _normaliser_cases():
    return [(61, 96, 2), (35, 96, 2), (10, 10, 1), (7, 40, 4), (0, 12, 3)]


@exercise("07.3", 2, "Cross-rank token normalisation")
def token_divisor(answer):
    """answer(local_tokens, global_tokens, world_size) -> what each rank divides its loss SUM by, so
    that after DDP averages the ranks every real token weighs 1 / global_tokens."""
    if not callable(answer):
        return "give a function divisor(local_tokens, global_tokens, world_size)."
    for local, total, world in _normaliser_cases():
        got = float(answer(local, total, world))
        if not math.isclose(got, total / world, rel_tol=1e-12):
            if math.isclose(got, local, rel_tol=1e-12):
                return "dividing by the rank's own tokens gives the mean of per-rank means, not the global token mean."
            if math.isclose(got, total, rel_tol=1e-12):
                return "close: remember DDP divides the all-reduced SUM by the number of ranks afterwards."
            return f"for local={local}, global={total}, ranks={world} your divisor is {got}; think about what DDP does after summing."
    return None


def fsdp_bytes_expected(shapes, world_size, element_size):
    sharded = sum(math.ceil(s[0] / world_size) * math.prod(s[1:]) for s in shapes) * element_size
    full = sum(math.prod(s) for s in shapes) * element_size
    return sharded, full


@exercise("07.4", 3, "FSDP2 gradient memory per rank")
def fsdp_memory(answer):
    """answer(shapes, world_size, element_size) -> (bytes per rank syncing every micro-step,
    bytes per rank between micro-steps with set_requires_gradient_sync(False))."""
    if not callable(answer):
        return (
            "give a function grad_bytes(shapes, world_size, element_size) -> (sync_each, no_sync)."
        )
    cases = [
        ([(64, 16), (64,), (64, 64), (64,), (1, 64), (1,)], 2, 8),
        ([(10, 3), (10,)], 4, 4),
        ([(7,)], 3, 2),
        ([(128, 128)], 1, 4),
    ]
    for shapes, world, esize in cases:
        got = tuple(int(v) for v in answer(shapes, world, esize))
        want = fsdp_bytes_expected(shapes, world, esize)
        if got[1] != want[1]:
            return "without sync each rank keeps the UNSHARDED gradient of every parameter it used."
        if got[0] != want[0]:
            if got[0] == want[1] // world or abs(got[0] - want[1] / world) < 1:
                return "close: FSDP2 shards dim 0 and pads it so every rank gets the same number of rows."
            return "syncing every micro-step, each rank keeps only its shard (dim 0 split over the ranks)."
    return None
