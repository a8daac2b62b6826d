"""Lesson 12's pipeline experiments: two CPU processes with gloo run torch's pipeline schedules
(`accumlab.scale.stages`), and this module checks what they produced against one process.

`pipeline_experiments()` launches the ranks once (with `accumlab.dist.launch`: a hard timeout,
every process stopped afterwards) and returns a plain dict: gradient differences and factors,
the recorded pass orders and the bubble they give when replayed on a clock (`accumlab.scale.schedule.replay`).
"""

from __future__ import annotations

import torch

from .. import _validate
from .._validate import positive_float, positive_int
from ..compare import grad_diff
from ..reference import accumulated_grads, full_batch_grads
from .schedule import bubble_fraction, in_flight, replay, schedule_order
from .stages import EXPERIMENTS, MICRO_BATCH_SIZE, batches, pipe_model

WORLD_SIZE = 2  # one stage per process; this machine has 2 cores


def _merge(per_rank: list[dict], name: str) -> dict:
    grads: dict = {}
    for rank in per_rank:
        grads.update(rank["grads"][name])
    return grads


def _flat(grads: dict, keys) -> torch.Tensor:
    return torch.cat([grads[k].reshape(-1).double() for k in keys])


def weights_of(result: dict, parts: list[dict]) -> dict:
    """Least-squares weights w with result ≈ Σ w_i · parts[i], and how much is left unexplained."""
    _validate.tensor_dict("result", result)
    for i, part in enumerate(_validate.sequence("parts", parts)):
        if set(_validate.tensor_dict(f"parts[{i}]", part)) != set(result):
            raise ValueError(
                f"parts[{i}] must name the parameters of result {sorted(result)}, got {sorted(part)}"
            )
    keys = sorted(parts[0])
    a = torch.stack([_flat(p, keys) for p in parts], dim=1)
    b = _flat(result, keys)
    for name, t in (("result", b), *((f"parts[{i}]", a[:, i]) for i in range(a.shape[1]))):
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} must hold finite numbers, got a NaN or inf")
        if not bool(t.any()):  # zero: no relative residual (result), any weight fits (a part)
            raise ValueError(f"{name} must not be all zeros: there is no direction to weigh")
    w = torch.linalg.lstsq(a, b.unsqueeze(1)).solution.squeeze(1)
    residual = float((a @ w - b).norm() / b.norm())
    return {"weights": [float(x) for x in w], "residual": residual}


def _orders_match(orders: list, schedule: str, m: int) -> bool:
    return [list(o) for o in orders] == schedule_order(schedule, len(orders), m)


def pipeline_experiments(*, seed: int = 0, timeout: float = 120.0) -> dict:
    """Launch 2 ranks running torch's pipeline schedules and compare with one process. Lesson 12.

    Returns, per experiment of `accumlab.scale.stages.EXPERIMENTS`: the pipeline gradient's
    difference from the single-process accumulated gradient (or its weights on each step's
    gradient), whether each rank ran its passes in the order `schedule_order` writes down, and
    the bubble replayed from those recorded orders; torch's error for 1F1B with m < S.
    """
    from ..dist.launcher import launch

    timeout = positive_float("timeout", timeout)
    seed = positive_int(
        "seed", seed, minimum=0
    )  # checked here: inside a rank it would fail as a crash
    per_rank = launch(
        "accumlab.scale.stages:pipeline_task",
        WORLD_SIZE,
        kwargs={"seed": seed},
        timeout=timeout,
        device="cpu",  # the schedules' semantics, not GPU speed: CPU processes on any machine
        progress_total=len(EXPERIMENTS),
        desc="pipeline experiments",
    )
    model = pipe_model(seed)
    out: dict = {"experiments": {}, "errors": per_rank[0]["errors"], "world_size": WORLD_SIZE}
    for name, (schedule, m, scale, steps) in EXPERIMENTS.items():
        grads = _merge(per_rank, name)
        data = batches(steps, m, seed)
        # what one process gets accumulating each step's m micro-batches with loss / m
        per_step = [accumulated_grads(model, d, MICRO_BATCH_SIZE) for d in data]
        orders = [rank["orders"][name] for rank in per_rank]
        entry = {
            "schedule": schedule,
            "micro_batches": m,
            "scale_grads": scale,
            "steps": steps,
            "order_matches_schedule": _orders_match(orders, schedule, m),
            "in_flight": [in_flight(o) for o in orders],
            "replayed_bubble": replay(orders)["bubble"],
            "formula_bubble": bubble_fraction(WORLD_SIZE, m),
            "weights": weights_of(grads, per_step),
        }
        if steps == 1:
            entry["diff"] = grad_diff(grads, per_step[0])
            entry["full_batch_diff"] = grad_diff(grads, full_batch_grads(model, data[0]))
        out["experiments"][name] = entry
    return out
