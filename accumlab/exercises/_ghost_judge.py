"""What a wrong ghost batch norm (exercise 04.4) computed instead: the whole batch's statistics,
the unbiased variance, `torch.chunk`'s near-equal pieces, non-finite values, or the right method
in a precision that cannot reach the tolerance."""

from __future__ import annotations

import torch

# rows, ghost batch size; 10/4 ends with 2 rows; 12/5 is where x.chunk(ceil(12 / 5)) = [4, 4, 4]
# differs from x.split(5) = [5, 5, 2]
GHOST_CASES = ((12, 4), (10, 5), (8, 8), (10, 4), (12, 5))
GHOST_TOLERANCE = 1e-6  # absolute, on values of order 1: a float32 computation passes too
EPS = 1e-5


def _normalised(pieces, unbiased: bool = False) -> torch.Tensor:
    return torch.cat([(c - c.mean(0)) / (c.var(0, unbiased=unbiased) + EPS).sqrt() for c in pieces])


def ghost_reference(x: torch.Tensor, size: int) -> torch.Tensor:
    """Each chunk of `size` rows normalised with its own mean and biased variance (eps = 1e-5)."""
    return _normalised(x.split(size))


def _low_precision(got: torch.Tensor, returned: torch.dtype, x: torch.Tensor, size: int):
    """The half-precision type in which the right method gives `got`, or None. A float16 or
    bfloat16 result is compared with the reference computed in that type, to a few of its units
    of rounding (eps: 2^-10 and 2^-7): near, but no nearer than that type allows."""
    low = (torch.float16, torch.bfloat16)
    kinds = [returned] if returned in low else list(low)  # cast back: either may be behind it
    for kind in kinds:
        if returned not in low and not torch.equal(got, got.to(kind).to(torch.float64)):
            continue  # values a 16-bit type cannot hold did not come from it
        ref = ghost_reference(x.to(kind), size).to(torch.float64)
        tol = 8 * torch.finfo(kind).eps * max(1.0, float(ref.abs().max()))
        if torch.isfinite(ref).all() and torch.allclose(got, ref, rtol=0, atol=tol):
            return kind
    return None


def wrong_ghost(got: torch.Tensor, returned: torch.dtype, x: torch.Tensor, size: int) -> str:
    """The hint for a result `got` (float64, from a tensor of dtype `returned`) that is not within
    GHOST_TOLERANCE of the reference on `x` in chunks of `size` rows."""
    rows = len(x)
    where = f"(checked to ± {GHOST_TOLERANCE:g} on {rows} rows in chunks of {size})"
    bad = int((~torch.isfinite(got)).sum())
    if bad:
        return (
            f"{bad} of the {got.numel()} values you returned are NaN or infinite {where}; with "
            "eps = 1e-5 added to the variance before the square root, none should be"
        )
    close = lambda ref: torch.allclose(got, ref, rtol=0, atol=GHOST_TOLERANCE)  # noqa: E731
    if size < rows and close(_normalised([x])):
        return f"those are the whole batch's statistics; each chunk of rows needs its own {where}"
    if close(_normalised(x.split(size), unbiased=True)):
        return f"BatchNorm normalises with the biased variance (÷ n), not the unbiased one {where}"
    pieces = x.chunk(-(-rows // size))  # as many near-equal pieces as split gives
    if len(pieces) == len(x.split(size)) and close(_normalised(pieces)):
        return (
            f"torch.chunk(n) cuts x into n pieces of nearly equal size ({[len(c) for c in pieces]}"
            f"), not into chunks of {size} rows with a shorter last one {where}"
        )
    kind = _low_precision(got, returned, x, size)
    if kind is not None:
        name = str(kind).removeprefix("torch.")
        return (
            f"right method, but computed in {name}, whose rounding cannot reach ± "
            f"{GHOST_TOLERANCE:g} {where}: compute in float32 or float64"
        )
    if torch.allclose(got, ghost_reference(x, size), rtol=0, atol=1e-4):
        return (
            f"within 1e-4 but not ± {GHOST_TOLERANCE:g} {where}: a computation that loses digits "
            "(in float32, E[x²] − E[x]² cancels); centre each chunk before squaring, or compute "
            "in float64"
        )
    return f"use each chunk's mean and its biased variance (÷ n), with eps = 1e-5 {where}"
