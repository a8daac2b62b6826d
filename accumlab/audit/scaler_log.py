"""Replay the GradScaler calls a window made, from the log the instruments kept (lesson 08).

Each micro-batch's loss enters .grad multiplied by the scale of its `scaler.scale()` call; each
`unscale_` divides everything then in .grad by the scale of that moment. Replaying the logged calls
gives every micro-batch's net multiplier, 1 when the calls came in the documented order (scale
every loss, then one unscale_ after the window's last backward).
"""

from __future__ import annotations

from .recording import Recording


def segments(rec: Recording) -> list[list[tuple[str, float]]]:
    """The scaler calls (method, scale) between consecutive optimizer steps, one list per step."""
    calls = iter(rec.scaler_calls)
    out: list[list[tuple[str, float]]] = [[]]
    for kind, _position in rec.events:
        if kind == "step":
            out.append([])
        elif kind.startswith("scaler."):
            method, _pos, scale = next(calls)
            out[-1].append((method, scale))
    return out


def replay(calls: list[tuple[str, float]], n: int) -> tuple | None:
    """(multipliers per micro-batch, carry multiplier, codes) for one window of `n` micro-batches,
    or None when the scale() calls cannot be matched one-to-one with its micro-batches."""
    if sum(method == "scale" for method, _ in calls) != n:
        return None
    mults: list[float] = []
    carry = 1.0
    unscaled = updated = False
    order_codes: set[str] = set()
    for method, scale in calls:
        if method == "scale":
            mults.append(scale)
            if unscaled:
                order_codes.add("UNSCALE_MISUSE")  # unscale_ before this micro-batch's backward
            if updated:
                order_codes.add("SCALER_MISUSE")  # update() inside the window
        elif method == "unscale_":
            mults = [m / scale for m in mults]
            carry /= scale
            unscaled = True
        elif method == "update":
            updated = True
    if not unscaled:
        order_codes.add("SCALER_MISUSE")  # the optimizer saw gradients still multiplied
    if all(abs(m - 1.0) <= 1e-12 for m in mults):
        order_codes = set()
    return mults, carry, frozenset(order_codes)
