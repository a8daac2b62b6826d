"""Draw the autograd graph behind a tensor: torchviz when Graphviz exists, else a text tree
built from `grad_fn.next_functions` with the same nodes (lesson 01)."""

from __future__ import annotations

import html
import shutil
import subprocess
import warnings
from dataclasses import dataclass, field

import torch

from ._validate import instance, mapping
from .env import has_dot

# Graphviz's layout time grows much faster than the graph: measured here, a per-sample summed
# loss graph of 556 nodes took 0.2 s, of 1106 nodes 8 s, of 2206 nodes more than 40 s. Larger
# graphs are shown as text only, and any render is stopped after RENDER_SECONDS.
MAX_DRAWN_NODES = 500
RENDER_SECONDS = 10.0
# The text tree of a graph with thousands of nodes is unreadable and, indented by depth, can
# take hundreds of megabytes (a chain of 10**4 ops): show its start and say how much is left.
MAX_TEXT_LINES = 400
MAX_INDENT = 24


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
                bundle["image/svg+xml"] = render_svg(self.dot.source)
                return bundle
            except Exception as err:  # broken, missing or too slow Graphviz: fall back, say why
                note = f"\n(Graphviz could not draw it: {err})"
        else:
            note = ""
        bundle["text/html"] = f"<pre>{html.escape(self.text + note)}</pre>"
        return bundle


def render_svg(source: str, seconds: float | None = None) -> str:
    """Run Graphviz `dot -Tsvg` on `source` with a time limit; the process is killed and reaped
    whatever happens (time limit, an error, Ctrl-C), so no `dot` is left running. It stays in
    the caller's process group: Jupyter interrupts and restarts a kernel by signalling its whole
    group, and that then reaches `dot` too."""
    seconds = RENDER_SECONDS if seconds is None else seconds
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("Graphviz `dot` is not on PATH")
    proc = subprocess.Popen(
        [exe, "-Tsvg"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = proc.communicate(source.encode(), timeout=seconds)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"dot did not finish within {seconds:g} s and was stopped") from None
    finally:
        if proc.poll() is None:
            proc.kill()  # dot starts no children of its own
            proc.communicate()  # reap it and close the pipes
    if proc.returncode != 0:
        raise RuntimeError(f"dot exited with status {proc.returncode}: {err.decode()[:200]}")
    return out.decode()


def _label(fn, names: dict[int, str]) -> str:
    kind = type(fn).__name__
    var = getattr(fn, "variable", None)  # AccumulateGrad nodes point at their leaf tensor
    if var is not None:
        return f"{kind}({names.get(id(var), 'leaf ' + str(tuple(var.shape)))})"
    return kind


def _children(fn) -> list:
    return [child for child, _ in fn.next_functions if child is not None]


def draw_graph(tensor: torch.Tensor, params: dict[str, torch.Tensor] | None = None) -> GraphView:
    """The backward graph that `tensor.backward()` would walk. Never raises for a valid tensor.

    `params` names leaf tensors (e.g. `dict(model.named_parameters())` or `{"w": w}`).
    Node ids are `Kind#n` in first-visit order; a node reached twice is listed once. Graphs of
    more than MAX_DRAWN_NODES nodes are shown as text (Graphviz would take minutes).
    """
    instance("tensor", tensor, torch.Tensor, "a torch.Tensor")
    params = mapping("params", params) if params is not None else {}
    names = {id(t): n for n, t in params.items()}
    ids: dict[object, str] = {}
    nodes: list[str] = []
    edges: list[tuple[str, str]] = []
    lines: list[str] = []

    def enter(fn, depth: int) -> bool:
        """List `fn` at `depth`; True when it is new (its children come next)."""
        seen = fn in ids
        if not seen:
            ids[fn] = f"{_label(fn, names)}#{len(ids)}"
            nodes.append(ids[fn])
        indent = "    " * min(depth, MAX_INDENT) + (
            f"[depth {depth}] " if depth > MAX_INDENT else ""
        )
        lines.append(indent + ids[fn] + ("  (shown above)" if seen else ""))
        return not seen

    if tensor.grad_fn is None:
        text = "(no graph: this tensor is a leaf or was computed without grad)"
    else:
        # depth-first with an explicit stack: a chain of thousands of ops must not hit Python's
        # recursion limit. Each edge is recorded once its child's subtree is done.
        stack = [(tensor.grad_fn, 0, iter(_children(tensor.grad_fn)))]
        enter(tensor.grad_fn, 0)
        while stack:
            fn, depth, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                if stack:
                    edges.append((ids[stack[-1][0]], ids[fn]))
            elif enter(child, depth + 1):
                stack.append((child, depth + 1, iter(_children(child))))
            else:
                edges.append((ids[fn], ids[child]))
        text = "\n".join(lines[:MAX_TEXT_LINES])
        if len(lines) > MAX_TEXT_LINES:
            text += (
                f"\n... {len(lines) - MAX_TEXT_LINES} more lines: the graph has {len(nodes)} "
                "nodes (al.count_nodes counts them without drawing)"
            )
    dot = None
    if tensor.grad_fn is not None and len(nodes) <= MAX_DRAWN_NODES and has_dot():
        try:
            import torchviz

            with warnings.catch_warnings():
                # torchviz 0.0.3 compares versions with distutils' LooseVersion: noise, not a problem
                warnings.simplefilter("ignore", DeprecationWarning)
                dot = torchviz.make_dot(tensor, params=params)
        except Exception:  # torchviz missing or broken: the text tree still says everything
            dot = None
    return GraphView(nodes=nodes, edges=edges, text=text, dot=dot)


def count_nodes(tensor: torch.Tensor) -> int:
    """Number of distinct backward nodes behind `tensor` (cheap: no drawing)."""
    instance("tensor", tensor, torch.Tensor, "a torch.Tensor")
    seen, stack = set(), [tensor.grad_fn] if tensor.grad_fn is not None else []
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        stack.extend(child for child, _ in fn.next_functions if child is not None)
    return len(seen)
