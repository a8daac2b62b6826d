"""Which autograd nodes each backward pass of an answer walks: judged from the graph itself, not
from saved-tensor hooks, which an answer's own `save_on_cpu()`, `checkpoint(use_reentrant=False)`
or a thread of its own replace or never sees. Used by exercise 01.2 to tell one trunk walked
twice from two copies of it.

    with BackwardWalks() as walks:
        w.register_post_accumulate_grad_hook(lambda p: wrote.append(walks.running()))
        answer(w, x)
    shared_toward(walks.walks[a], walks.walks[b], w)   # the nodes both passes ran on the way to w
"""

from __future__ import annotations

import functools
import threading

import torch
from torch.autograd.graph import GradientEdge


class BackwardWalks:
    """Follows every backward pass started while the block runs, from any thread: the wrap is
    global (the engine's entry in `torch.autograd`, which `Tensor.backward`, `torch.autograd.backward`
    under any name it was imported as, and `torch.autograd.grad` all call), unlike saved-tensor
    hooks, which are thread-local. `walks[i]`: the nodes reachable from the tensors the i-th call
    started from, held so that their ids cannot be reused. `running()`, called from a hook that
    backward runs: the index of the call running on this thread (the innermost, when a backward
    starts another inside it). Not seen: a pass started by calling the C++ engine directly, and,
    in a torch without that entry (where `torch.autograd.backward` itself is wrapped), a backward
    imported by name before the block began."""

    def __init__(self):
        self.walks: list[list] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._name = ""
        self._original = None
        self._active = False

    def running(self) -> int | None:
        stack = getattr(self._local, "stack", None)
        return stack[-1] if stack else None

    def _watch(self, original):
        @functools.wraps(original)
        def watched(outputs, *args, **kwargs):
            if not self._active:  # left in place by a block that ended out of order: inert
                return original(outputs, *args, **kwargs)
            if not isinstance(outputs, (torch.Tensor, GradientEdge)):
                outputs = tuple(outputs)  # a generator is read once: pass on what was read
            nodes = _reachable(_roots(outputs))
            with self._lock:
                self.walks.append(nodes)
                index = len(self.walks) - 1
            stack = self._local.__dict__.setdefault("stack", [])
            stack.append(index)
            try:
                return original(outputs, *args, **kwargs)
            finally:
                stack.pop()

        watched._accumlab_walks = self
        return watched

    def __enter__(self) -> BackwardWalks:
        # the function backward and grad look up in torch.autograd's globals on each call
        engine = "_engine_run_backward"
        self._name = engine if hasattr(torch.autograd, engine) else "backward"
        self._original = getattr(torch.autograd, self._name)
        self._active = True
        setattr(torch.autograd, self._name, self._watch(self._original))
        return self

    def __exit__(self, *exc) -> None:
        # Blocks in two threads may end in either order: a block that ends while another's wrap
        # sits above its own leaves its wrap inert, and the later one skips inert wraps when it
        # restores, so no wrap outlives every block.
        self._active = False
        current = getattr(torch.autograd, self._name)
        if getattr(current, "_accumlab_walks", None) is not self:
            return
        restore = self._original
        while (
            getattr(restore, "_accumlab_walks", None) is not None
            and not restore._accumlab_walks._active
        ):
            restore = restore.__wrapped__
        setattr(torch.autograd, self._name, restore)


def _roots(outputs) -> list:
    items = (outputs,) if isinstance(outputs, (torch.Tensor, GradientEdge)) else outputs
    roots = []
    for item in items:
        node = item.node if isinstance(item, GradientEdge) else getattr(item, "grad_fn", None)
        if node is not None:
            roots.append(node)
    return roots


def _reachable(roots: list) -> list:
    from ..autograd.saved import _nodes  # the graph walk lesson 01's own tools use

    seen: dict[int, object] = {}
    for root in roots:
        for node in _nodes(root):
            seen.setdefault(id(node), node)
    return list(seen.values())


def shared_toward(first: list, second: list, leaf: torch.Tensor) -> list:
    """The nodes of both walks from which `leaf`'s gradient is reached (its AccumulateGrad node
    excluded): the part of the graph both passes ran on their way to `leaf`."""
    nodes = {id(n): n for n in (*first, *second)}
    parents: dict[int, list] = {}
    target = None
    for node in nodes.values():
        if getattr(node, "variable", None) is leaf:
            target = node
        for child, _ in node.next_functions:
            if child is not None:
                parents.setdefault(id(child), []).append(node)
    if target is None:
        return []
    reach, stack = {id(target): target}, [target]
    while stack:  # upward from the leaf's node: every node with a path down to it
        for parent in parents.get(id(stack.pop()), []):
            if id(parent) not in reach:
                reach[id(parent)] = parent
                stack.append(parent)
    in_first, in_second = {id(n) for n in first}, {id(n) for n in second}
    return [n for i, n in reach.items() if i in in_first and i in in_second and n is not target]


def wide_graphs(walks: list[list], rows: int, model: torch.nn.Module) -> int:
    """How many distinct batch-wide graphs `walks` ran through: a node is wide when its incoming
    gradient is a matrix with a side above `rows` and above every parameter's dimensions of
    `model` (so a weight's own gradient never counts), and walks that share a wide node walked one
    graph (a loss backpropagated in two `autograd.grad` calls). GradCache builds the batch-wide
    loss once and walks it into the cached embeddings; open_clip's loop builds and walks it once
    per micro-batch, whether its backward runs into the model or only into the one recomputed
    embedding whose gradient a second backward carries on, however the loss was written or
    checkpointed."""
    limit = max([rows, *(max(p.shape, default=1) for p in model.parameters())])

    def wide(node) -> bool:
        # the gradient shapes a node receives: torch's own record, read by compiled autograd. A
        # matrix with a side above the limit (logits of 8 rows against all 32 columns count); a
        # vector, also as one row or column, does not (a flattened surrogate <z, g> is one)
        meta = getattr(node, "_input_metadata", ())
        return any(sum(d > 1 for d in m.shape) > 1 and max(m.shape) > limit for m in meta)

    # walks hold their nodes, so an id names one node throughout
    return len(joined({id(n) for n in walk if wide(n)} for walk in walks))


def joined(node_sets) -> list[set[int]]:
    """The non-empty sets of `node_sets` with every two that share a node merged: the graphs that
    several backward walks ran through, when one graph may have been walked more than once."""
    graphs: list[set[int]] = []
    for ids in node_sets:
        if not ids:
            continue
        ids = set(ids)
        for shared in [g for g in graphs if g & ids]:
            graphs.remove(shared)
            ids |= shared
        graphs.append(ids)
    return graphs
