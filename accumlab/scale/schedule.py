"""Pipeline schedules as orders of work, and the time they take (lesson 12).

A pipeline stage runs forward (F) and backward (B) passes of micro-batches in some order. Given
each stage's order, `replay` lays the passes on a clock: F of micro-batch j on stage s waits for
F(j) on stage s − 1, B(j) on stage s waits for B(j) on stage s + 1 (the last stage's B waits for
its own F), and a stage does one thing at a time. The idle share of the clock is the bubble.

`schedule_order` writes down the orders torch's `ScheduleGPipe` and `Schedule1F1B` use (read from
torch/distributed/pipelining/schedules.py); the lesson checks them against the orders recorded
from a real two-process pipeline, then uses them for any number of stages (a simulation).
"""

from __future__ import annotations

import math

from .._validate import MAX_STEPS, one_of, positive_float, positive_int, positive_ints
from .shapes import passes

SCHEDULES = ("GPipe", "1F1B")


def bubble_fraction(stages: int, micro_batches: int) -> float:
    """(S − 1) / (m + S − 1): the idle share of a GPipe or 1F1B step with equal stage costs."""
    s = positive_int("stages", stages)
    m = positive_int("micro_batches", micro_batches)
    return (s - 1) / (m + s - 1)


def schedule_order(schedule: str, stages: int, micro_batches: int) -> list[list[tuple[str, int]]]:
    """Per stage, the (kind, micro-batch) passes in the order torch's schedule runs them.

    GPipe: all forwards, then all backwards. 1F1B: stage s warms up with min(m, S − s) forwards,
    then alternates one backward and one forward, then drains the backwards. torch's Schedule1F1B
    refuses m < S (a ValueError), and so does this function.
    """
    one_of("schedule", schedule, SCHEDULES)
    s_count = positive_int("stages", stages)
    m = positive_int("micro_batches", micro_batches)
    _passes_bound(s_count, m)
    if schedule == "GPipe":
        return [[("F", j) for j in range(m)] + [("B", j) for j in range(m)]] * s_count
    if m < s_count:
        raise ValueError(
            f"micro_batches must be at least stages={s_count} for 1F1B (torch's Schedule1F1B "
            f"refuses fewer), got {m}"
        )
    orders = []
    for s in range(s_count):
        warmup = min(m, s_count - s)
        order = [("F", j) for j in range(warmup)]
        f, b = warmup, 0
        while b < m:
            order.append(("B", b))
            b += 1
            if f < m:
                order.append(("F", f))
                f += 1
        orders.append(order)
    return orders


def _passes_bound(stages: int, micro_batches: int) -> None:
    if 2 * stages * micro_batches > MAX_STEPS:
        raise ValueError(
            f"stages × micro_batches = {stages} × {micro_batches}: {2 * stages * micro_batches:,} "
            f"passes to lay out, at most {MAX_STEPS:,} (a step of Python work each)"
        )


def in_flight(order: list[tuple[str, int]]) -> int:
    """Most micro-batches whose forward has run and backward has not: activations held at once.
    A backward of a micro-batch with no forward pending before it (or a second forward of one
    already in flight) is not an order a stage can run: refused, naming the pass."""
    order = passes("order", order)
    pending: set[int] = set()
    peak = 0
    for i, (kind, j) in enumerate(order):
        if kind == "F":
            if j in pending:
                raise ValueError(f"order[{i}] = ('F', {j}): micro-batch {j} is already in flight")
            pending.add(j)
        elif j not in pending:
            raise ValueError(
                f"order[{i}] = ('B', {j}): a backward needs its micro-batch's forward earlier in "
                "the order"
            )
        else:
            pending.remove(j)
        peak = max(peak, len(pending))
    return peak


def replay(orders, t_forward: float = 1.0, t_backward: float = 2.0) -> dict:
    """Lay each stage's passes on a clock (see the module docstring) and measure the bubble.

    `t_forward` / `t_backward` are one stage's pass times, a number or one per stage. Returns
    {"spans": per stage [(kind, mb, start, end)], "makespan", "busy": per stage, "bubble": per
    stage idle share}. A set of orders that can never finish raises ValueError.
    """
    if not isinstance(orders, (list, tuple)) or not orders:
        raise ValueError(f"orders must be a non-empty list of per-stage orders, got {orders!r}")
    n = len(orders)
    orders = [passes(f"orders[{s}]", order) for s, order in enumerate(orders)]
    if sum(len(o) for o in orders) > MAX_STEPS:
        raise ValueError(f"orders hold more than {MAX_STEPS:,} passes (a step of Python work each)")
    tf = _per_stage("t_forward", t_forward, n)
    tb = _per_stage("t_backward", t_backward, n)
    # the clock only adds pass times: bound the longest possible step before laying it out
    longest = sum(len(o) for o in orders) * max(tf + tb)
    if not math.isfinite(longest):
        raise ValueError(
            f"t_forward={t_forward!r} and t_backward={t_backward!r} are too large: "
            f"{sum(len(o) for o in orders)} passes of them overflow a float clock"
        )
    done: dict[tuple[str, int, int], float] = {}
    free = [0.0] * n
    pos = [0] * n
    spans: list[list[tuple[str, int, float, float]]] = [[] for _ in range(n)]
    while any(pos[s] < len(orders[s]) for s in range(n)):
        progressed = False
        for s in range(n):
            while pos[s] < len(orders[s]):
                kind, j = orders[s][pos[s]]
                if kind == "F":
                    dep = ("F", s - 1, j) if s > 0 else None
                else:
                    dep = ("B", s + 1, j) if s < n - 1 else ("F", s, j)
                if dep is not None and dep not in done:
                    break
                start = max(free[s], done[dep] if dep is not None else 0.0)
                end = start + (tf[s] if kind == "F" else tb[s])
                done[(kind, s, j)] = free[s] = end
                spans[s].append((kind, j, start, end))
                pos[s] += 1
                progressed = True
        if not progressed:
            stuck = {s: orders[s][pos[s]] for s in range(n) if pos[s] < len(orders[s])}
            raise ValueError(f"orders can never finish: each stage waits on another ({stuck})")
    makespan = max(free)
    busy = [sum(e - b for _, _, b, e in stage) for stage in spans]
    return {
        "spans": spans,
        "makespan": makespan,
        "busy": busy,
        "bubble": [1 - x / makespan for x in busy],
    }


def _per_stage(name: str, value, n: int) -> list[float]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name} must give one time per stage ({n}), got {len(value)}")
        return [positive_float(f"{name}[...]", v) for v in value]
    return [positive_float(name, value)] * n


def bubble_curves(stages, micro_batches) -> dict:
    """Replayed bubble (GPipe order, t_B = 2 t_F) against the formula, for every S and m."""
    stages = positive_ints("stages", stages)
    micro_batches = positive_ints("micro_batches", micro_batches)
    _passes_bound(sum(stages), sum(micro_batches))
    out = {"micro_batches": list(micro_batches), "replayed": {}, "formula": {}}
    for s in stages:
        out["replayed"][s] = [
            replay(schedule_order("GPipe", s, m))["bubble"][0] for m in micro_batches
        ]
        out["formula"][s] = [bubble_fraction(s, m) for m in micro_batches]
    return out
