"""Exercise 09.4's check that the gradient came from GradCache's own pass 2: every backward pass
into the learner's model added one micro-batch's share (the encoder's vector-Jacobian product with
that micro-batch's rows of d loss / d embedding), and .grad is what those passes added, so a
gradient computed elsewhere (a copy, another thread, hand-written layers) and copied or
back-propagated in is refused. Also: how many separately built loss graphs the backward walks ran
through (`loss_graphs`), calls to accumlab's InfoNCE (`LossCalls`) and the bytes a GradCache step
may hold at once (`allowed_bytes`)."""

from __future__ import annotations

import copy

import torch

from ._answers import Hint
from ._calls import CodeWatch
from ._model_effects import multiple_of


def _cotangents(model, data) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, d loss / d embedding): the batch's encoder inputs (anchors then positives) and the
    gradient of the one InfoNCE over all of them at each row's embedding — what pass 2 of each
    micro-batch back-propagates."""
    from ..coupling.contrastive import info_nce

    twin = copy.deepcopy(model)
    rows = torch.cat([data.x, data.y])
    n = len(data)
    with torch.no_grad():
        z = twin(rows)
    z.requires_grad_()
    info_nce(z[:n], z[n:]).backward()
    return rows, z.grad


def _received_cotangents(arrived, rows, dz) -> bool:
    """Every watched forward with a graph received, at its output, the cached gradient of its own
    rows, all times one factor c > 0 (a loss scaled by n and .grad divided by n is GradCache too)."""
    where = {r.numpy().tobytes(): i for i, r in enumerate(rows)}
    got, want = [], []
    for p in arrived.passes:
        if p["out"] is None or p["x"] is None:
            continue
        index = [where.get(r.numpy().tobytes()) for r in p["x"]]
        if None in index:
            return False
        got.append(p["grad"].reshape(-1))
        want.append(dz[index].reshape(-1))
    return bool(got) and multiple_of(torch.cat(got), torch.cat(want), rel=1e-8)


def from_own_backwards(learner, added, arrived, model, data) -> None:
    """The .grad the answer left must come from pass 2 through `learner` itself: what its
    backward passes added is exactly what flowed back through the outputs of the forwards the
    checker watched, each output received its rows' cached d loss / d embedding (one common
    factor), and .grad is a positive multiple of what the passes added. A gradient computed on a
    copy, in another thread or by hand layers, and copied or back-propagated in, fails one."""
    from ..compare import flatten

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
    got = flatten({n: p.grad for n, p in learner.named_parameters()})
    total = sum(vectors) if vectors else torch.zeros_like(got)
    through = arrived.through_outputs(model)
    rows, dz = _cotangents(model, data)
    same = bool((total - through).abs().max() <= 1e-8 * through.abs().max())
    unused = [p for p in arrived.passes if p["out"] is not None and not bool(p["grad"].any())]
    if unused:  # e.g. pass 1 run with a graph and its output detached: nothing flowed back
        raise Hint(
            f"{len(unused)} forward(s) of the model ran with a graph whose output received no "
            "gradient: GradCache's pass 1 embeds under torch.no_grad(), and only pass 2 keeps "
            "a graph, one micro-batch at a time"
        )
    if not bool(through.any()) or not same or not _received_cotangents(arrived, rows, dz):
        raise Hint(
            "a backward pass into the model added something other than pass 2: each micro-batch's "
            "rows of d loss / d embedding (cached from the one loss over every embedding), "
            "back-propagated through its own forward of the model"
        )
    if not multiple_of(got, total, rel=1e-9):
        raise Hint(
            ".grad ended as something other than what your backward passes into the model added: "
            "let each micro-batch's backward write the gradient (a gradient computed elsewhere "
            "and copied into .grad is not GradCache)"
        )


# operations a pass-2 surrogate may apply to the embeddings: linear in them (products with the
# cached gradient, sums, views, slices, joins), and a reentrant checkpoint's node (the model's
# forward rerun inside it). Any other (exp, log, a norm, a softmax) is a loss being differentiated.
LINEAR = frozenset(
    "Mul Div Add Sub Neg Sum Nansum Mean Slice Select Cat Stack Split SplitWithSizes Unbind View "
    "UnsafeView ReshapeAlias Squeeze Unsqueeze Expand Repeat Clone AsStrided T Transpose Permute "
    "Dot Mv Mm Bmm Trace Diag Diagonal Index IndexSelect Gather ToCopy Alias CopySlices "
    "AccumulateGrad CheckpointFunction".split()
)


def loss_graphs(walks: list[list], passes: list[dict], model) -> tuple[int, str]:
    """How many separately built graphs with a nonlinear operation (one not in LINEAR) the
    backward walks ran through, above the outputs of the model's forwards, and one such
    operation's name. Walks that share such a node walked one graph (a loss backpropagated in two
    `autograd.grad` calls). GradCache builds its loss once; open_clip's loop builds it once per
    micro-batch, however it is written (in blocks of any size, by hand) and wherever its gradient
    goes (into the model, or into a copy of the embeddings that a second backward carries on)."""
    from ._backward_nodes import _reachable, joined

    exits = {p["node"] for p in passes if p.get("node") is not None}  # (id, kind) of each output
    odd_sets, name = [], ""
    for walk in walks:  # a walk holds its nodes: an id in it names one node
        outputs = [n for n in walk if (id(n), type(n).__name__) in exits]
        inside = {id(n) for n in _reachable(outputs)}
        odd = [n for n in walk if id(n) not in inside and _kind(n) not in LINEAR]
        name = name or (type(odd[0]).__name__ if odd else "")
        odd_sets.append({id(n) for n in odd})
    return len(joined(odd_sets)), name


def _kind(node) -> str:
    from torch.autograd.function import BackwardCFunction
    from torch.utils.checkpoint import CheckpointFunction

    if isinstance(node, BackwardCFunction):
        # a custom autograd.Function computes what its own backward says, whatever its class is
        # called: only torch's reentrant checkpoint (the model's forward rerun) counts as linear
        own = getattr(node, "_forward_cls", None)
        return (
            "CheckpointFunction" if own is CheckpointFunction else f"Function {type(node).__name__}"
        )
    return type(node).__name__.rstrip("0123456789").removesuffix("Backward")


class LossCalls:
    """Counts calls to accumlab's InfoNCE (`accumlab.coupling.contrastive.info_nce`, however the
    answer reached it: `al.coupling.info_nce`, a name imported from its module before the check,
    a copy of its code) that build a graph (grad enabled, an input that requires grad): GradCache
    evaluates the loss once, open_clip's loop once per micro-batch. Counted by code identity
    (`_calls.CodeWatch`), so no binding of the function needs patching."""

    def __init__(self):
        self.calls = 0
        self.rows: list[int] = []  # each counted call's rows of q: a micro-batch's, or the batch's

    def _judge(self, frame, name: str) -> None:
        tensors = [frame.f_locals.get(a) for a in ("q", "k")]
        tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            self.calls += 1
            self.rows.append(len(tensors[0]) if tensors[0].dim() else 0)

    def __enter__(self):
        from ..coupling.contrastive import info_nce

        self._watch = CodeWatch({info_nce.__code__: "info_nce"}, self._judge).start()
        return self

    def __exit__(self, *exc):
        self._watch.stop()


def allowed_bytes(model, data, micro_batch_size) -> dict:
    """What a GradCache step may hold for backward at once: the loss graph over all cached
    embeddings with at most one micro-batch's encoder graph (one micro-batch kept with its graph
    through the loss saves its second forward), or later one micro-batch's encoder graph with at
    most all the cached gradients. Several micro-batch graphs alive, one backward at the end, are
    big-batch memory (open_clip's loop, one loss per micro-batch, is refused before this)."""
    from ..coupling.contrastive import info_nce, pair_inputs
    from ..coupling.gradcache import encoder_saved_bytes
    from ..saved import saved_tensor_bytes

    with torch.no_grad():
        z = model(pair_inputs(data))
    n = len(data)
    q, k = z[:n].clone().requires_grad_(), z[n:].clone().requires_grad_()
    loss = saved_tensor_bytes(lambda: info_nce(q, k))
    chunk = encoder_saved_bytes(model, data[:micro_batch_size])
    cached = 2 * z.numel() * z.element_size()
    return {"loss": loss, "chunk": chunk, "cached": cached, "bound": chunk + max(loss, cached)}
