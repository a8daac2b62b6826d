"""Lesson 07 exercises: DDP/FSDP gradient sync under accumulation."""

from __future__ import annotations

import math
from types import CodeType

from . import exercise
from ._answers import Hint, compare, integers, number, tolerance_words
from ._calls import Refuse, code_key
from ._draws import fresh_rng

# 07.1: a model DDP splits into BUCKETS buckets, K micro-steps per optimizer step
BUCKETS, K = 3, 6


@exercise("07.1", 1, "All-reduce calls with 3 buckets and k = 6")
def rounds(answer):
    """answer = (syncing every micro-step, no_sync around forward and backward of the first k-1,
    no_sync around only their backward): all-reduce calls in one optimizer step."""
    every, no_sync, backward_only = integers(answer, 3)
    if (every, no_sync, backward_only) == (K, 1, K):
        raise Hint(
            "those count the backward passes that sync; each of them all-reduces every bucket "
            f"({BUCKETS} here)"
        )
    # by default (find_unused_parameters=False), every gradient is in one bucket until the rebuild
    # (one per dtype and device: this model's gradients are all float64, on the CPU)
    first = 1 + (K - 1) * BUCKETS
    if (every, no_sync, backward_only) == (first, 1, first):
        raise Hint(
            "those are the first optimizer step's: with find_unused_parameters=False (the default), "
            "DDP starts with the gradients of each dtype and device in one bucket "
            "and splits them into its buckets at the forward after the first synced backward; "
            "count a later step"
        )
    if every != K * BUCKETS:
        raise Hint(
            f"syncing every micro-step: how many backward passes does one optimizer step run "
            f"(k = {K}), and how many buckets does each all-reduce?"
        )
    if no_sync != BUCKETS:
        raise Hint(
            "with no_sync on the first k - 1 micro-steps only the last backward syncs: how many "
            "buckets does it all-reduce?"
        )
    if backward_only != K * BUCKETS:
        raise Hint(
            "DDP decides whether the coming backward syncs when the FORWARD runs: a forward "
            "outside no_sync() prepares a synchronising backward"
        )
    return None


LOOPS_07_2 = "ABCDE"
RIGHT_07_2 = {"A", "C", "D"}


@exercise("07.2", 2, "Which loops sync once, on the last micro-step?")
def which_loops(answer):
    """answer = the letters of the loops (A-E in the notebook) that all-reduce exactly once per
    optimizer step, on its last micro-step."""
    if isinstance(answer, str):
        letters = {c for c in answer.upper() if c.isalpha()}
    elif isinstance(answer, (set, frozenset, list, tuple)) and all(
        isinstance(c, str) for c in answer
    ):
        letters = {c.strip().upper() for c in answer}
    else:
        raise Hint("answer with the letters, e.g. 'AB' or {'A', 'B'}")
    if not letters or not letters <= set(LOOPS_07_2):
        raise Hint(f"answer with letters among {', '.join(LOOPS_07_2)}, got {sorted(letters)}")
    if letters != RIGHT_07_2:
        # one hint for every wrong set, naming no letter and not saying whether a letter is too
        # many or missing: any hint that tells them apart lets guesses walk to the answer
        raise Hint(
            "not this set of loops. For each of the five, follow one window: what is "
            "require_backward_grad_sync when each FORWARD runs (DDP decides there whether the "
            "coming backward syncs, wherever that backward runs), and does the last "
            "micro-step's forward see it True?"
        )
    return None


# 07.3: (local tokens, global tokens, ranks, k) cases; every rank's loss SUM is divided by the
# answer, the framework's backward divides by k as well, DDP averages the ranks
def cases_07_3() -> list[tuple[int, int, int, int]]:
    """Drawn afresh at every check, so a table of typed-in divisors does not fit: two cases of
    several ranks whose divisor is no binary or decimal fraction (so rounding it shows) and differs from
    the rank's own count, one rank alone, and a rank with no tokens. Counts stay below 256,
    which a 16-bit float holds exactly: only the division can round."""
    rng = fresh_rng()
    cases = []
    while len(cases) < 2:
        world, k = rng.randint(2, 8), rng.randint(2, 8)
        total = rng.randint(world * k, 250)
        local = rng.randint(1, total - 1)
        odd = world * k // math.gcd(total, world * k)
        while odd % 2 == 0 or odd % 5 == 0:
            odd //= 2 if odd % 2 == 0 else 5
        if odd > 1 and local * world * k != total and local * world != total:
            cases.append((local, total, world, k))
    alone = rng.randint(3, 200)
    cases.append((alone, alone, 1, rng.choice((3, 5, 6, 7))))
    world, k = rng.randint(2, 8), rng.choice((3, 5, 6, 7))
    return [*cases, (0, rng.randint(world * k + 1, 250), world, k)]  # a divisor other than 1


REL_07_3 = 1e-6  # float32 arithmetic (an all-reduced count in a tensor) is right too
CLOSE_07_3 = 1e-2  # closer than this, but not within REL_07_3: the method, in too little precision


@exercise("07.3", 2, "Token normalisation when the backward also divides by k")
def token_divisor(answer):
    """answer(local_tokens, global_tokens, world_size, k) -> what each rank divides its token-loss
    SUM by, in a loop whose backward divides by k as well (accelerator.backward does), so that
    after DDP averages the ranks every real token weighs 1 / global_tokens."""
    if not callable(answer):
        raise Hint("answer with a function divisor(local_tokens, global_tokens, world_size, k)")
    words = tolerance_words(rel=REL_07_3)
    for local, total, world, k in cases_07_3():
        try:
            raw = answer(local, total, world, k)
            got = number(raw)
        except Hint as hint:
            raise Hint(
                f"divisor({local}, {total}, {world}, {k}) returned no number: {hint}"
            ) from None
        want = total / (world * k)
        if got == 0:
            raise Hint(
                f"divisor({local}, {total}, {world}, {k}) is 0: a loss cannot be divided by 0"
            )
        if math.isclose(got, want, rel_tol=REL_07_3):
            continue
        coarse = compare(raw, want, rel=REL_07_3)  # right to its digits, but rounded too far?
        # a 16-bit tensor's value is not typed-in digits: its hint is the precision one below
        sixteen_bits = getattr(getattr(raw, "dtype", None), "itemsize", 8) <= 2
        # only near the value: 1 for 4/3 is "right to one digit" but not a rounding of the method
        close = math.isclose(got, want, rel_tol=CLOSE_07_3)
        if coarse.startswith("close") and close and not sixteen_bits:
            raise Hint(f"divisor({local}, {total}, {world}, {k}) = {got:g}: {coarse}")
        if local == 0:
            raise Hint(
                f"divisor(0, {total}, {world}, {k}) = {got:g}: a rank with no tokens divides "
                "by what every other rank divides by; the divisor does not depend on its own count"
            )
        weight = want / got  # each token then weighs weight / global_tokens
        if math.isclose(got, local, rel_tol=REL_07_3) or math.isclose(
            got, local / k, rel_tol=REL_07_3
        ):
            raise Hint(
                "a rank's own token count makes each rank's tokens weigh differently: DDP then "
                "averages per-rank means, not every token"
            )
        if math.isclose(weight, 1 / k, rel_tol=REL_07_3):
            raise Hint(
                f"with your divisor each real token weighs 1 / ({k} · global_tokens): the "
                "backward's own division by k comes on top of yours"
            )
        if math.isclose(got, want, rel_tol=CLOSE_07_3):
            raise Hint(
                f"divisor({local}, {total}, {world}, {k}) = {got:.6g}: close — compute it in "
                f"more precision (it is {abs(got / want - 1):.1e} off, relatively; a 16-bit "
                f"float keeps about 3 significant digits; checked to {words})"
            )
        raise Hint(
            f"for local={local}, global={total}, ranks={world}, k={k} every real token weighs "
            f"{weight:.4g} / global_tokens with your divisor (checked to {words}); count what "
            "divides each token's loss: your divisor, the backward's k, DDP's average over ranks"
        )
    return None


def fsdp_bytes_expected(shapes, world_size, element_size):
    """(bytes of the padded shard every rank holds, bytes of the unsharded gradient)."""
    sharded = sum(math.ceil(s[0] / world_size) * math.prod(s[1:]) for s in shapes) * element_size
    full = sum(math.prod(s) for s in shapes) * element_size
    return sharded, full


REFERENCE_07_4 = "al.exercises.lesson07.fsdp_bytes_expected"
# the lesson's FSDP model on its 2 ranks (float64), which the notebook's numbers reproduce
LESSON_07_4 = ([(64, 16), (64,), (64, 64), (64,), (1, 64), (1,)], 2, 8)


def _rows_not_dividing(rng, world: int, low: int = 1) -> int:
    """A row count that is no multiple of `world` (2 or more), so its shard is padded."""
    while True:
        rows = rng.randint(low, 200)
        if rows % world:
            return rows


def cases_07_4() -> list[tuple[list[tuple[int, ...]], int, int]]:
    """Drawn afresh at every check, so a table of typed-in byte counts does not fit: the lesson's
    model first, then several parameters on 2-8 ranks with at least one padded shard, a single
    vector whose rows the ranks do not divide, and one rank (nothing padded)."""
    rng = fresh_rng()

    def shape(rows: int) -> tuple[int, ...]:
        return (rows, *(rng.randint(1, 40) for _ in range(rng.randint(0, 2))))

    world = rng.randint(2, 8)
    many = [shape(rng.randint(1, 200)) for _ in range(rng.randint(1, 3))]
    many.insert(rng.randint(0, len(many)), shape(_rows_not_dividing(rng, world)))
    alone = rng.randint(3, 8)
    single = [(_rows_not_dividing(rng, alone),)]
    one = [shape(rng.randint(1, 200)) for _ in range(rng.randint(1, 2))]
    return [
        LESSON_07_4,
        (many, world, rng.choice((2, 4, 8))),
        (single, alone, rng.choice((2, 4, 8))),
        (one, 1, rng.choice((2, 4, 8))),
    ]


@exercise("07.4", 3, "FSDP2 gradient memory per rank")
def fsdp_memory(answer):
    """answer(shapes, world_size, element_size) -> (bytes per rank syncing every micro-step,
    bytes per rank between micro-steps with set_requires_gradient_sync(False)); exact bytes."""
    if not callable(answer):
        raise Hint(
            "answer with a function grad_bytes(shapes, world_size, element_size) -> (sync_each, no_sync)"
        )
    package = (getattr(answer, "__module__", None) or "").split(".")[0]
    code = getattr(answer, "__code__", None)
    reference = code_key(fsdp_bytes_expected.__code__)
    if isinstance(code, CodeType) and code_key(code) == reference:
        package = "accumlab"  # a copy of the checker's reference, from its code or its source
    if package in ("accumlab", "solutions"):  # the package's reference, the repository's key
        owner = "accumlab's own" if package == "accumlab" else "the solutions folder's"
        raise Hint(
            f"this exercise asks you to write it yourself — your answer is {owner} "
            f"{getattr(answer, '__qualname__', 'function')}"
        )
    for shapes, world, esize in cases_07_4():
        where = f"for shapes {shapes}, {world} rank(s), {esize}-byte elements"
        try:
            with Refuse(REFERENCE_07_4):  # a call to the checker's own reference, from the answer
                got = answer(shapes, world, esize)
            each, no_sync = integers(got, 2)
        except Hint as hint:
            raise Hint(f"{where}: {hint}") from None
        want_each, want_full = fsdp_bytes_expected(shapes, world, esize)
        if (each, no_sync) == (want_each, want_full):
            continue
        if (each, no_sync) == (want_full, want_each):
            raise Hint("the order is (syncing every micro-step, without sync between micro-steps)")
        if no_sync != want_full:
            raise Hint(
                f"{where}: without sync each rank keeps the UNSHARDED gradient of every "
                f"parameter it used; your answer says {no_sync} bytes"
            )
        if each != want_each:
            unpadded = sum(math.prod(s) for s in shapes) * esize / world
            if math.isclose(each, unpadded, abs_tol=1) or each == int(unpadded):
                raise Hint(
                    f"{where}: close — FSDP2 pads dimension 0 to a multiple of the ranks, so "
                    "every rank holds ceil(rows / ranks) rows of each parameter, padding included"
                )
            raise Hint(
                f"{where}: syncing every micro-step, each rank keeps only its shard of each "
                f"gradient (dimension 0 split over the ranks); your answer says {each} bytes"
            )
    return None
