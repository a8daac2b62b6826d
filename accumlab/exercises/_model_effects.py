"""What an answer did to the model itself: which original modules are still there (`Modules`), and
what each backward pass added to its gradients (`Added`, `multiple_of`). Re-exported by
`accumlab.exercises._observe`, whose `Observe` watches the forwards and backwards."""

from __future__ import annotations

import torch
from torch import nn


def _graph_task() -> int:
    return torch._C._current_graph_task_id()  # the backward pass running now (-1 outside one)


class Modules:
    """`before = Modules(model)` before the answer runs; afterwards `before.missing(model_after,
    nn.BatchNorm1d)` names the original modules of that kind no longer in the model (by `is`:
    replaced, e.g. by `nn.Identity`, or removed), and `before.sentence(...)` says it in words."""

    def __init__(self, model: nn.Module):
        self.original = dict(model.named_modules())

    def missing(self, model: nn.Module, kind: type | tuple = nn.Module) -> list[str]:
        now = {id(m) for m in model.modules()} if isinstance(model, nn.Module) else set()
        return [n for n, m in self.original.items() if isinstance(m, kind) and id(m) not in now]

    def sentence(self, model: nn.Module, kind: type | tuple = nn.Module) -> str | None:
        """None when every original module of `kind` is still there, else e.g. "your answer
        replaced 2 of the 2 BatchNorm1d layers (1: now Identity, 4: now Identity)"."""
        gone = self.missing(model, kind)
        if not gone:
            return None
        total = sum(isinstance(m, kind) for m in self.original.values())
        now = dict(model.named_modules()) if isinstance(model, nn.Module) else {}
        what = ", ".join(
            f"{n or 'the model'}: now {type(now[n]).__name__ if n in now else 'removed'}"
            for n in gone
        )
        kinds = kind.__name__ if isinstance(kind, type) else "original"
        return f"your answer replaced {len(gone)} of the {total} {kinds} layers ({what})"


class Added:
    """`with Added(model) as added: answer(...)`: what each backward pass added to the model's
    gradients. Tensor hooks see the incoming gradient itself, whatever `.grad` held before or is
    set to afterwards; a gradient computed on a copy of the model is not seen (hooks are not
    copied), and forwards with a graph through modules holding parameters other than the model's
    (a copy, or a twin loaded with its weights) are counted in `added.foreign_forwards`, by a
    global forward hook that a copy cannot shed. Forwards under `torch.no_grad()` (logging) are
    not counted: no gradient can come from them. `added.vectors()`: one flat vector per pass;
    `added.restarted()`: the passes that found `.grad` empty (zeroed or None since the pass before)
    and `added.restart_hint(k)` says so in words."""

    def __init__(self, model: nn.Module):
        self.params = dict(model.named_parameters())
        self._ours = {id(p) for p in self.params.values()}
        self.passes: dict[int, dict[str, torch.Tensor]] = {}
        self.foreign_forwards = 0
        self.fresh: dict[int, dict[str, bool]] = {}  # per pass: .grad after it = its gradient alone

    def _hook(self, name):
        def hook(grad):
            added = self.passes.setdefault(_graph_task(), {})
            added[name] = added.get(name, 0) + grad.detach().clone()

        return hook

    def _after(self, name):
        def hook(p):
            came = self.passes.get(_graph_task(), {}).get(name)
            if came is not None:  # `.grad` = what this pass brought, bit for bit: it was empty
                self.fresh.setdefault(_graph_task(), {})[name] = torch.equal(p.grad, came)

        return hook

    def _on_forward(self, module, args):
        own = list(module.parameters(recurse=False))
        if own and torch.is_grad_enabled() and not any(id(p) in self._ours for p in own):
            self.foreign_forwards += 1

    def __enter__(self) -> Added:
        from torch.nn.modules.module import register_module_forward_pre_hook

        self._handles = [
            p.register_hook(self._hook(n)) for n, p in self.params.items() if p.requires_grad
        ]
        self._handles += [
            p.register_post_accumulate_grad_hook(self._after(n))
            for n, p in self.params.items()
            if p.requires_grad
        ]
        self._handles.append(register_module_forward_pre_hook(self._on_forward))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()

    def vectors(self) -> list[torch.Tensor]:
        """One flat vector per backward pass, in parameter-name order (zeros where none came)."""
        from ..compare import flatten

        return [
            flatten({n: added.get(n, torch.zeros_like(p)) for n, p in self.params.items()})
            for added in self.passes.values()
        ]

    def restarted(self) -> list[int]:
        """The passes after the first whose every `.grad` held only their own gradient afterwards:
        `.grad` was zeroed (or set to None) before them, so the window was summed elsewhere.
        torch.autograd.grad passes write no `.grad` and are not counted."""
        found = [self.fresh.get(task, {}) for task in self.passes]
        return [i for i, f in enumerate(found) if i and f and all(f.values())]

    def restart_hint(self, k: int) -> str:
        first = self.restarted()[0]
        return (
            f"backward pass {first + 1} of {k} found .grad empty: your answer zeroed it between "
            "micro-batches and summed their gradients somewhere else. Accumulation lets each "
            "backward add into .grad itself: zero once, before the first backward"
        )


def multiple_of(got: torch.Tensor, of: torch.Tensor, rel: float = 1e-10) -> bool:
    """got = c · of for one c > 0, to `rel` of the largest entry (float64 round-off by default)."""
    if not bool(of.any()):
        return False
    scale = float(got @ of / (of @ of))
    return scale > 0 and bool((got - scale * of).abs().max() <= rel * (scale * of).abs().max())
