"""Instrumenting an answer: how it computed, not only what it returned.

An exercise that teaches a way of computing (accumulate over micro-batches, retain the graph,
freeze a layer, cache embeddings, use the framework's backward, keep a float32 main gradient) judges
what the answer ran. Used by the checkers of lessons 01-04, 09, 11 and 12:

- `Observe(model)` — forwards, and the rows each received, on every module of `model` (the model
  itself and each submodule, so `for layer in model: h = layer(h)` is seen as well as `model(x)`);
  backward passes that wrote `.grad`, told apart from `torch.autograd.grad` calls that never do;
  bytes saved for backward and graphs alive at once (through `accumlab.saved.LiveSavedTensors`).
- `Modules(model)` (in `_model_effects`, with `Added`) — whether the original modules are still the ones in the model (`is`): a
  BatchNorm replaced by `nn.Identity` is gone, not frozen.
- `Spy(owner, "name")` — calls to one API (`accelerator.backward`, `torch.Tensor.backward`).
- `Refuse("al.scale.noise_scale", ...)` — a call to accumlab's own implementation of the answer
  from the answer's code becomes the hint "this exercise asks you to write it yourself".

Each observation renders as a sentence a hint can quote:

    with Observe(model) as seen:
        answer(model, data, 8)
    if len(seen.forwards) != 4:
        raise Hint(f"your answer ran {seen.forwards_phrase()}; accumulation runs "
                   f"{forwards_phrase([8] * 4)}")   # "1 forward of 32 rows; ... 4 forwards of 8 rows"

Hooks stay inert once the block ends. `copy.deepcopy` copies a module's forward hooks: a copy the
answer makes inside the block is observed too, under the original's module names.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch._C import _autograd

from ._answers import Hint  # noqa: F401 - checkers may import it from here

# calls to an API, and refusing accumlab's own implementation: in _calls, reached from here too
from ._calls import Refuse, Spy, plural  # noqa: F401
from ._graph_watch import _reentrant_rerun
from ._graphs_alive import _GraphsAlive
from ._model_effects import Added, Modules, _graph_task, multiple_of  # noqa: F401
from ._rows import _first_tensor, _rows, _rows_key  # noqa: F401 - _rows_key: reached from here too


@dataclass(frozen=True)
class Call:
    """One forward of one module: the rows it received (the first dimension of its first tensor
    argument; None without one) and whether autograd was recording a graph."""

    rows: int | None
    graph: bool


def forwards_phrase(rows: list) -> str:
    """'no forward', '1 forward of 32 rows', '4 forwards of 8 rows', '3 forwards (8, 8, 16 rows)'."""
    rows = [c.rows if isinstance(c, Call) else c for c in rows]
    if not rows:
        return "no forward"
    if len(set(rows)) == 1:
        each = rows[0]
        return plural(len(rows), "forward") + ("" if each is None else f" of {plural(each, 'row')}")
    return f"{plural(len(rows), 'forward')} ({', '.join(str(r) for r in rows)} rows)"


class Observe:
    """`with Observe(model) as seen: answer(...)`, then read:

    - `seen.calls[name]`: the `Call`s of each module (`""` is `model` itself, "0", "0.bn", ...);
    - `seen.forwards`: the passes through the model, counted at its entry module — `entry` if
      given, else the first module without children in registration order (a Sequential's first
      layer, an embedding) — so layers called one by one still count;
    - `seen.recomputed`: the entry forwards that backward reran (activation checkpointing), apart;
    - `seen.reentrant`: module forwards and backward passes that `checkpoint(use_reentrant=True)`'s
      backward ran of its own (a rerun with a graph, and a backward through it): apart too;
    - `seen.backwards`: backward passes that wrote `.grad` of a parameter (`.backward()`,
      `accelerator.backward`); `seen.grad_only`: passes that reached the parameters without
      writing `.grad` (`torch.autograd.grad`);
    - `seen.peak_saved_bytes`, `seen.peak_graphs`: the most bytes saved for backward, and the most
      forwards with a graph not yet freed, alive at once (parameters excluded);
    - `seen.summary()`: "your answer ran 4 forwards of 8 rows and 4 backward passes; at most 1
      graph was alive at once".

    With `inputs=True`, `seen.inputs` also holds a copy of the first tensor argument of each
    entry forward (in `seen.forwards`' order), for `seen.fed(micro_batches)`: whether the forwards
    with a graph received exactly the micro-batches' rows, one forward each (a reshaped full batch
    has the right row count but not the right rows).
    """

    def __init__(self, model: nn.Module, *, entry: str | None = None, inputs: bool = False):
        if not isinstance(model, nn.Module):
            raise TypeError(f"Observe needs an nn.Module, got {type(model).__name__}")
        modules = dict(model.named_modules())
        if entry is None:
            entry = next(n for n, m in modules.items() if not any(True for _ in m.children()))
        if entry not in modules:
            raise ValueError(f"entry={entry!r} is not a module of the model: {sorted(modules)}")
        self.model, self.entry = model, entry
        self._keep_inputs = inputs
        self.inputs: list[torch.Tensor | None] = []  # with inputs=True: each entry forward's input
        self.calls: dict[str, list[Call]] = {name: [] for name in modules}
        self.recomputed: list[Call] = []  # entry forwards that backward reran (checkpointing)
        self._passes = 0  # entry forwards so far: the index that tags saved tensors
        self._accumulated: set[int] = set()  # graph tasks that wrote .grad
        self._reached: set[int] = set()  # graph tasks that computed a parameter's gradient
        self.reentrant = 0  # reruns and inner passes inside a reentrant checkpoint's backward
        self._handles: list = []
        self._active = False
        self._saved: _GraphsAlive | None = None
        self._pushed: list[bool] = []  # per module forward running: did its pre-hook push hooks?
        self._pushed_live: list[bool] = []  # per module forward running: is it the answer's?

    def _on_forward(self, name: str):
        def hook(module, args, kwargs):
            # a forward that backward reruns (activation checkpointing) is not the answer's
            live = self._active and _graph_task() == -1
            self._pushed.append(self._see_through_answer_hooks() if live else False)
            self._pushed_live.append(live)  # inside a forward of the answer's
            if self._active and not live and _reentrant_rerun():
                self.reentrant += 1
            if self._active and not live and name == self.entry and torch.is_grad_enabled():
                # a reentrant checkpoint's forward ran without a graph: this rerun records it
                self.recomputed.append(Call(_rows(args, kwargs), True))
            if live:
                self.calls[name].append(Call(_rows(args, kwargs), torch.is_grad_enabled()))
                if name == self.entry:
                    self._passes += 1
                    if self._keep_inputs:
                        self.inputs.append(_first_tensor(args, kwargs))

        return hook

    def _see_through_answer_hooks(self) -> bool:
        """An answer's own saved-tensor hooks (`torch.autograd.graph.saved_tensors_hooks`,
        `save_on_cpu`) sit above the checker's and would hide every tensor the model saves: for
        the length of this module's forward, push the checker's count composed with them (the
        answer's hooks still get every tensor). True when pushed, for the forward hook to pop."""
        top = _autograd._top_saved_tensors_default_hooks(False)
        ours = self._saved._pack
        if top is not None and (top[0] == ours or getattr(top[0], "_accumlab_count", False)):
            return False
        if top is None:  # the answer popped the checker's hooks: count on our own
            _autograd._push_saved_tensors_default_hooks(ours, self._saved._unpack)
            return True
        their_pack, their_unpack = top

        def pack(t):
            return ours(t), their_pack(t)  # ours holds the tensor as long as the answer's does

        def unpack(pair):
            return their_unpack(pair[1])

        pack._accumlab_count = True
        _autograd._push_saved_tensors_default_hooks(pack, unpack)
        return True

    def _after_forward(self, module, args, kwargs, output) -> None:
        if self._pushed_live:
            self._pushed_live.pop()
        if self._pushed and self._pushed.pop():
            _autograd._pop_saved_tensors_default_hooks()

    def _on_grad(self, grad):
        if self._active:
            self._count(self._reached)

    def _on_accumulated(self, param):
        if self._active:
            self._count(self._accumulated)

    def _count(self, passes: set[int]) -> None:
        # a reentrant checkpoint's backward runs a backward of its own, inside the answer's pass:
        # it is not one of the answer's passes
        if _reentrant_rerun():
            self.reentrant += 1
        else:
            passes.add(_graph_task())

    def __enter__(self) -> Observe:
        for name, module in self.model.named_modules():
            self._handles.append(
                module.register_forward_pre_hook(self._on_forward(name), with_kwargs=True)
            )
            self._handles.append(  # always_call: a forward that raises still pops what we pushed
                module.register_forward_hook(
                    self._after_forward, with_kwargs=True, always_call=True
                )
            )
        for p in self.model.parameters():
            if p.requires_grad:
                self._handles.append(p.register_hook(self._on_grad))
                self._handles.append(p.register_post_accumulate_grad_hook(self._on_accumulated))
        self._saved = _GraphsAlive(
            self.model.parameters(), lambda: self._passes, lambda: any(self._pushed_live)
        )
        self._saved.__enter__()
        self._active = True
        return self

    def __exit__(self, *exc) -> None:
        self._active = False
        # an answer stopped inside a forward (a time limit, the stop button: BaseExceptions, for
        # which torch skips always-call forward hooks) leaves the pushes of the forwards still
        # running unpopped, above the checker's own hooks; whichever hooks the answer's own `with`
        # popped on its way out, that many entries sit above ours
        for _ in range(sum(self._pushed)):
            _autograd._pop_saved_tensors_default_hooks()
        self._pushed.clear()
        self._saved.__exit__(*exc)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    @property
    def forwards(self) -> list[Call]:
        return self.calls[self.entry]

    @property
    def rows(self) -> list[int | None]:
        return [c.rows for c in self.forwards]

    @property
    def backwards(self) -> int:
        return len(self._accumulated)

    @property
    def grad_only(self) -> int:
        return len(self._reached - self._accumulated)

    @property
    def peak_saved_bytes(self) -> int:
        return self._saved.peak if self._saved else 0

    def peak_rows_alive(self) -> int:
        """The most rows whose forwards' graphs (forwards that recorded one) were alive at once."""
        rows = [(c.rows or 0) if c.graph else 0 for c in self.forwards]
        # each set of `together` numbers, from 1, the forwards whose saved tensors were alive at once
        together = self._saved.together if self._saved else []
        at_once = (sum(rows[i - 1] for i in s if 0 < i <= len(rows)) for s in together)
        return max([*rows, *at_once], default=0)

    @property
    def peak_graphs(self) -> int:
        return self._saved.peak_graphs if self._saved else 0

    def forwards_phrase(self) -> str:
        return forwards_phrase(self.rows)

    def fed(self, micro_batches: list) -> str | None:
        """None when the entry forwards that recorded a graph received, one each and in any
        order, exactly the rows of `micro_batches` (tensors, or objects with `.x`); else the
        sentence a hint quotes: "2 of your 3 forwards with a graph received rows that are not
        one of the micro-batches (a reshaped or concatenated batch?)". Needs `inputs=True`."""
        if not self._keep_inputs:
            raise TypeError("Observe(model, inputs=True) keeps the inputs that fed() compares")
        from collections import Counter

        wanted = Counter(_rows_key(getattr(mb, "x", mb)) for mb in micro_batches)
        graphs = [x for x, c in zip(self.inputs, self.forwards, strict=True) if c.graph]
        unmatched = 0
        for x in graphs:
            key = _rows_key(x)
            if wanted[key] > 0:
                wanted[key] -= 1
            else:
                unmatched += 1
        missing = sum(wanted.values())
        if not unmatched and not missing:
            return None
        said = []
        if unmatched:
            said.append(
                f"{unmatched} of your {plural(len(graphs), 'forward')} with a graph received rows "
                "that are not one of the micro-batches (a reshaped, concatenated or repeated batch?)"
            )
        if missing:
            said.append(
                f"{plural(missing, 'micro-batch', 'micro-batches')} never went through the model "
                "with a graph"
            )
        return "; ".join(said)

    def no_graph_note(self) -> str:
        """ " (...)" when forwards ran but none recorded a graph: the usual two causes, named."""
        if self.forwards and not any(c.graph for c in self.forwards):
            return (
                " (every forward ran without a graph: under torch.no_grad(), or inside "
                "torch.utils.checkpoint with use_reentrant=True, whose forward reruns inside "
                "backward where the check does not count it — use_reentrant=False is followed)"
            )
        return ""

    def backwards_phrase(self) -> str:
        text = plural(self.backwards, "backward pass", "backward passes")
        text = "no backward pass" if not self.backwards else text
        if self.grad_only:
            text += f" and {plural(self.grad_only, 'torch.autograd.grad call')} (which leave .grad alone)"
        return text

    def graphs_phrase(self) -> str:
        return f"at most {plural(self.peak_graphs, 'graph')} alive at once"

    def summary(self) -> str:
        return (
            f"your answer ran {self.forwards_phrase()} and {self.backwards_phrase()}; "
            f"{self.graphs_phrase()}"
        )
