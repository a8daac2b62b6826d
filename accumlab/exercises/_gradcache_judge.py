"""Exercise 09.4's check that the gradient came from GradCache's own pass 2: every backward pass
into the learner's model added one micro-batch's share (the encoder's vector-Jacobian product with
that micro-batch's rows of d loss / d embedding), and .grad is what those passes added, so a
gradient computed elsewhere (a copy, another thread, hand-written layers) and copied or
back-propagated in is refused."""

from __future__ import annotations

import copy

import torch

from ._answers import Hint


def _chunk_pieces(model, data, mb: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """What each micro-batch's pass 2 adds: the encoder's vector-Jacobian product with that
    micro-batch's rows of d loss / d embedding, through its anchors and through its positives
    (one backward may carry both, or one tower each)."""
    from ..compare import flatten
    from ..coupling.contrastive import info_nce

    twin = copy.deepcopy(model)
    names = [n for n, _ in twin.named_parameters()]
    params = [p for _, p in twin.named_parameters()]
    n = len(data)
    with torch.no_grad():
        z = twin(torch.cat([data.x, data.y]))
    z.requires_grad_()
    info_nce(z[:n], z[n:]).backward()

    def vjp(x, rows):
        grads = torch.autograd.grad(twin(x), params, z.grad[rows], allow_unused=True)
        return flatten(
            {
                k: g if g is not None else torch.zeros_like(p)
                for k, g, p in zip(names, grads, params)
            }
        )

    pieces, start = [], 0
    for chunk in data.micro_batches(mb):
        rows = slice(start, start + len(chunk))
        later = slice(n + start, n + start + len(chunk))
        pieces.append((vjp(chunk.x, rows), vjp(chunk.y, later)))
        start += len(chunk)
    return pieces


def _each_pass_is_a_chunks(vectors, pieces) -> bool:
    """Every backward pass added one unmatched piece: a micro-batch's anchors, its positives, or
    both at once, to float64 rounding."""
    left = {(c, part) for c in range(len(pieces)) for part in (0, 1)}

    def same(v, w):
        return bool((v - w).abs().max() <= 1e-8 * w.abs().max())

    for v in vectors:
        for c, (a, p) in enumerate(pieces):
            if (c, 0) in left and (c, 1) in left and same(v, a + p):
                left -= {(c, 0), (c, 1)}
                break
            part = next((i for i, w in ((0, a), (1, p)) if (c, i) in left and same(v, w)), None)
            if part is not None:
                left.remove((c, part))
                break
        else:
            return False
    return True


def from_own_backwards(learner, added, model, data, mb: int) -> None:
    """The .grad the answer left must be what its backward passes into `learner` added, each
    one micro-batch's pass 2: not a gradient computed on a copy (in this thread or another) or
    by hand, and copied or back-propagated in."""
    from ..compare import flatten

    pieces = _chunk_pieces(model, data, mb)
    if added.foreign_forwards:
        raise Hint(
            "your answer ran a forward with a graph through another model's layers (a copy of "
            "`model`?): GradCache backpropagates through `model` itself, one micro-batch at a time"
        )
    vectors = added.vectors()
    if any(not bool(v.any()) for v in vectors):
        raise Hint(
            "a backward pass into the model added nothing to .grad: each micro-batch's pass-2 "
            "backward carries its rows of d loss / d embedding"
        )
    if not _each_pass_is_a_chunks(vectors, pieces):
        raise Hint(
            "a backward pass into the model added something other than one micro-batch's pass 2: "
            "its rows of d loss / d embedding, back-propagated through its own forward (anchors, "
            "positives, or both)"
        )
    got = flatten({n: p.grad for n, p in learner.named_parameters()})
    total = sum(vectors) if vectors else torch.zeros_like(got)
    if not bool(((got - total).abs() <= 1e-9 * total.abs().max()).all()) or not bool(total.any()):
        raise Hint(
            ".grad ended as something other than what your backward passes into the model added: "
            "let each micro-batch's backward write the gradient (a gradient computed elsewhere "
            "and copied into .grad is not GradCache)"
        )
