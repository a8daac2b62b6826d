"""What exercise 05.3 watches beyond `Observe`: the graphs an answer still references (saved
tensors freed or not), and whether each micro-batch's gradient came through the forward the
checker saw."""

from __future__ import annotations

import sys
import weakref

import torch


class GraphsReferenced:
    """Graphs still referenced, with or without their saved tensors: a loss kept in a list, or a
    running total that a loss was added to, keeps every autograd node behind it after backward has
    freed the saved tensors. Each forward's module outputs carry a marker as a pre-hook of their autograd
    node, which dies with the node; `peak` is the most forwards with a node alive at once,
    sampled whenever a module output is made (the previous micro-batch's loss is usually still bound
    then, so a right loop reads 2)."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.entry = next(m for m in model.modules() if not any(True for _ in m.children()))
        self._passes = 0
        self._alive: dict[int, int] = {}
        self.peak = 0
        self._handles: list = []

    def _drop(self, index: int) -> None:
        self._alive[index] -= 1
        if not self._alive[index]:
            del self._alive[index]

    def _tag(self, module, args, output) -> None:
        if _recomputing():
            return
        if isinstance(output, torch.Tensor) and output.grad_fn is not None:
            marker = _Marker()
            self._alive[self._passes] = self._alive.get(self._passes, 0) + 1
            weakref.finalize(marker, self._drop, self._passes)
            # held by the node as a hook (a no-op): unlike its `metadata` dict, an answer cannot
            # clear it, and it dies with the node
            output.grad_fn.register_prehook(marker)
            self.peak = max(self.peak, len(self._alive))

    def _count(self, module, args) -> None:
        if not _recomputing():
            self._passes += 1

    def __enter__(self) -> GraphsReferenced:
        self._handles.append(self.entry.register_forward_pre_hook(self._count))
        for module in self.model.modules():
            self._handles.append(module.register_forward_hook(self._tag))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()


def _recomputing() -> bool:
    """A forward run by backward itself (activation checkpointing recomputes the forward inside
    the backward pass): not one of the answer's forwards."""
    return torch._C._current_graph_task_id() != -1


def _reentrant_rerun() -> bool:
    """Inside `checkpoint(..., use_reentrant=True)`'s backward: its first forward ran without a
    graph, so this rerun is the only forward of those rows that records one."""
    from torch.utils.checkpoint import CheckpointFunction

    code, frame = CheckpointFunction.backward.__code__, sys._getframe(1)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    return frame is not None


class _Marker:
    __slots__ = ("__weakref__",)

    def __call__(self, grad_outputs):
        return None  # the gradient flows on unchanged


class OutputGradients:
    """For each forward through the model that records a graph: a copy of its input, a copy of
    its output (at the last layer, so layers called one by one are seen too) and the gradient
    backward brought to that output, summed over backward calls. Whatever the loss formula, the
    mean loss's gradient at a micro-batch's output is 2 (output - y) / (all target elements): an
    answer whose gradient came from another graph (built outside the model's modules, its saved
    tensors hidden by hooks of its own) leaves the forwards the checker saw without it."""

    def __init__(self, model: torch.nn.Module):
        leaves = [m for m in model.modules() if not any(True for _ in m.children())]
        self.entry, self.exit = leaves[0], leaves[-1]
        self.passes: list[dict] = []
        self._handles: list = []

    def _enter(self, module, args) -> None:
        if _recomputing() and not _reentrant_rerun():
            return
        x = next((a for a in args if isinstance(a, torch.Tensor)), None)
        self.passes.append({"x": None if x is None else x.detach().clone(), "out": None})

    def _exit(self, module, args, output) -> None:
        if _recomputing() and not _reentrant_rerun():
            return
        if not self.passes or not isinstance(output, torch.Tensor) or output.grad_fn is None:
            return
        record = self.passes[-1]
        # the output's node by id and kind only: holding it would keep the graph alive, and nodes
        # take no weak references
        node = (id(output.grad_fn), type(output.grad_fn).__name__)
        record.update(out=output.detach().clone(), grad=torch.zeros_like(output), node=node)

        def arrived(grad, record=record):
            record["grad"] = record["grad"] + grad.detach()

        output.register_hook(arrived)

    def not_own(self, micro, direction, rel: float = 1e-6) -> int:
        """How many micro-batches' forwards with a graph did not receive a positive multiple of
        their own loss's gradient at the output, `direction(out, mb)` (any scale: the loss may be
        divided by anything): a decoy `0 * out.sum()` receives nothing, whatever it adds to .grad
        through other paths."""
        from ._model_effects import multiple_of
        from ._observe import _rows_key

        by_rows = {_rows_key(mb.x): mb for mb in micro}
        graphs = [p for p in self.passes if p["out"] is not None]
        missed = max(len(micro) - len(graphs), 0)
        for p in graphs:
            mb = by_rows.get(_rows_key(p["x"]))
            if mb is None:
                missed += 1
                continue
            if not bool(torch.isfinite(p["grad"]).all()):
                continue  # a GradScaler overflow: inf or NaN arrived, and the step is skipped
            want = direction(p["out"], mb).reshape(-1).double()
            if not multiple_of(p["grad"].reshape(-1).double(), want, rel=rel):
                missed += 1
        return missed

    def through_outputs(self, model: torch.nn.Module) -> torch.Tensor:
        """What the gradients that reached the outputs add to the parameters: for each forward
        with a graph, the vector-Jacobian product of its received gradient through a copy of
        `model` (as it was when the forwards ran), summed, flat in name order. A backward pass
        that adds anything else to .grad — through a graph beside the model's — makes .grad
        differ from it."""
        import copy

        from ..compare import flatten

        twin = copy.deepcopy(model)
        names = [n for n, _ in twin.named_parameters()]
        params = [p for _, p in twin.named_parameters()]
        total = {n: torch.zeros_like(p) for n, p in zip(names, params, strict=True)}
        for p in self.passes:
            if p["out"] is None or p["x"] is None or not bool(p["grad"].any()):
                continue
            grads = torch.autograd.grad(twin(p["x"]), params, p["grad"], allow_unused=True)
            for n, g in zip(names, grads, strict=True):
                if g is not None:
                    total[n] += g
        return flatten(total)

    def wrong(self, micro, elements: int) -> int:
        """How many micro-batches' forwards with a graph did not receive the mean loss's gradient."""
        from ._observe import _rows_key

        by_rows = {_rows_key(mb.x): mb for mb in micro}
        graphs = [p for p in self.passes if p["out"] is not None]
        missed = len(micro) - len(graphs) if len(graphs) < len(micro) else 0
        for p in graphs:
            mb = by_rows.get(_rows_key(p["x"]))
            if mb is None or p["out"].shape != mb.y.shape:
                missed += 1
                continue
            expected = 2 * (p["out"] - mb.y) / elements
            if not torch.allclose(p["grad"], expected, rtol=1e-6, atol=1e-12):
                missed += 1
        return missed

    def __enter__(self) -> OutputGradients:
        self._handles = [
            self.entry.register_forward_pre_hook(self._enter),
            self.exit.register_forward_hook(self._exit),
        ]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
