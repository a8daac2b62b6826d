"""Draw the autograd graph behind a tensor: torchviz when Graphviz exists, else a text tree
built from `grad_fn.next_functions` with the same nodes (lesson 01)."""

from __future__ import annotations

import html
import warnings
from dataclasses import dataclass, field

import torch

from .env import has_dot


@dataclass
class GraphView:
    """The nodes and edges of a backward graph; shows itself as SVG (Graphviz) or as a text tree."""

    nodes: list[str]
    edges: list[tuple[str, str]]
    text: str
    dot: object | None = field(default=None, repr=False)  # a graphviz.Digraph when dot exists

    def __str__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {"text/plain": self.text}
        if self.dot is not None:
            try:
                bundle["image/svg+xml"] = self.dot.pipe(format="svg").decode()
            except Exception as err:  # a broken Graphviz install: fall back, say why
                bundle["text/html"] = (
                    f"<pre>{html.escape(self.text)}\n(Graphviz failed: {err})</pre>"
                )
        else:
            bundle["text/html"] = f"<pre>{html.escape(self.text)}</pre>"
        return bundle


def _label(fn, names: dict[int, str]) -> str:
    kind = type(fn).__name__
    var = getattr(fn, "variable", None)  # AccumulateGrad nodes point at their leaf tensor
    if var is not None:
        return f"{kind}({names.get(id(var), 'leaf ' + str(tuple(var.shape)))})"
    return kind


def draw_graph(tensor: torch.Tensor, params: dict[str, torch.Tensor] | None = None) -> GraphView:
    """The backward graph that `tensor.backward()` would walk. Never raises for a valid tensor.

    `params` names leaf tensors (e.g. `dict(model.named_parameters())` or `{"w": w}`).
    Node ids are `Kind#n` in first-visit order; a node reached twice is listed once.
    """
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"tensor must be a torch.Tensor, got {type(tensor).__name__}")
    names = {id(t): n for n, t in (params or {}).items()}
    ids: dict[object, str] = {}
    nodes: list[str] = []
    edges: list[tuple[str, str]] = []
    lines: list[str] = []

    def visit(fn, depth: int) -> None:
        seen = fn in ids
        if not seen:
            ids[fn] = f"{_label(fn, names)}#{len(ids)}"
            nodes.append(ids[fn])
        lines.append("    " * depth + ids[fn] + ("  (shown above)" if seen else ""))
        if seen:
            return
        for child, _ in fn.next_functions:
            if child is not None:
                visit(child, depth + 1)
                edges.append((ids[fn], ids[child]))

    if tensor.grad_fn is None:
        text = "(no graph: this tensor is a leaf or was computed without grad)"
    else:
        visit(tensor.grad_fn, 0)
        text = "\n".join(lines)
    dot = None
    if has_dot() and tensor.grad_fn is not None:
        try:
            import torchviz

            with warnings.catch_warnings():
                # torchviz 0.0.3 compares versions with distutils' LooseVersion: noise, not a problem
                warnings.simplefilter("ignore", DeprecationWarning)
                dot = torchviz.make_dot(tensor, params=params or {})
        except Exception:  # torchviz missing or broken: the text tree still says everything
            dot = None
    return GraphView(nodes=nodes, edges=edges, text=text, dot=dot)


def count_nodes(tensor: torch.Tensor) -> int:
    """Number of distinct backward nodes behind `tensor` (cheap: no drawing)."""
    seen, stack = set(), [tensor.grad_fn] if tensor.grad_fn is not None else []
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        stack.extend(child for child, _ in fn.next_functions if child is not None)
    return len(seen)
