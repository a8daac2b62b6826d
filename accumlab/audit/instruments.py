"""The instruments an audit attaches to the copies it hands a learner's loop (lesson 08).

A forward pre-hook notes which micro-batch each forward consumed (forwards under `torch.no_grad()`
add no gradient and are ignored); a forward hook tags the output's autograd nodes, so the audit
learns whether backward ever reached that graph and whether it is still alive later; a hook on
every parameter notes each backward that put gradient into it, what it added, and whether that
backward went through a tagged graph (model.forward(x) or a submodule called directly builds an
untagged one), which `provenance` reads to tell accumulated gradients from written-in ones;
optimizer step pre- and post-hooks read parameters and gradients; `zero_grad`, the scheduler and
the scaler are wrapped on their instances only, each call logged with the position it happened
at. A `scaler.step` that skips the optimizer's step (inf/NaN found) is logged as a skipped step.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable

import torch
from torch import nn

from ..data import Data
from ..engine import grads_of, params_of
from ..saved import LiveSavedTensors
from .guard import Budget
from .recording import BackwardRecord, StepRecord

SCALER_METHODS = ("scale", "unscale_", "step", "update")


class _GraphTag:
    """Hung on a forward's output node as a pre-hook: it lives exactly as long as that graph, and
    it is called when backward reaches the graph."""

    __slots__ = ("forward", "step", "on_use", "__weakref__")

    def __init__(self, forward: int, step: int, on_use: Callable[[int, bool], None]):
        self.forward, self.step, self.on_use = forward, step, on_use

    def __call__(self, grad_outputs):
        g = grad_outputs[0] if grad_outputs else None
        finite = g is None or bool(torch.isfinite(g).all())
        self.on_use(self.forward, finite)
        return None  # the gradient flows on unchanged


def _tensors(output) -> list[torch.Tensor]:
    """The tensors a forward returned: the output itself, or those in its tuple, list or dict."""
    if isinstance(output, torch.Tensor):
        return [output]
    values = output.values() if isinstance(output, dict) else output
    if isinstance(values, (list, tuple)) or hasattr(values, "__iter__"):
        return [v for v in values if isinstance(v, torch.Tensor)]
    return []


def _first_tensor(output):
    if isinstance(output, torch.Tensor):
        return output
    values = output.values() if isinstance(output, dict) else output
    if isinstance(values, (list, tuple)) or hasattr(values, "__iter__"):
        for v in values:
            if isinstance(v, torch.Tensor):
                return v
    return None


def _norm_updates(model: nn.Module) -> int:
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.num_batches_tracked is not None:
            return int(m.num_batches_tracked)
    return 0


class Instruments:
    """Installs every hook and wrapper on the copies and records into `rec` (a Recording)."""

    def __init__(self, rec, model, optimizer, batches: list[Data], budget: Budget):
        self.rec, self.model, self.optimizer = rec, model, optimizer
        self.batches, self.budget = batches, budget
        self.epoch = 0
        self.by_id: dict[
            int, int
        ] = {}  # id of an input tensor handed out -> micro-batch (run-wide)
        self.held: list = []  # every epoch's copies stay alive, so no id is reused
        self.pending: list = []  # micro-batches first forwarded since the last step
        self.seen: set[int] = set()
        self.tags: list[weakref.ref] = []
        self.handles: list = []
        self.params_before: dict | None = None
        self.scaler = None
        self.error_where = ""
        self.backward: dict | None = None  # the backward now running: tagged graph reached?
        self.live_saved = LiveSavedTensors(exclude=list(model.parameters()))

    # ------------------------------------------------------------------ installation
    def install(self, scheduler, scaler) -> None:
        self.scaler = scaler
        self.handles += [
            self.model.register_forward_pre_hook(self._on_forward, with_kwargs=True),
            self.model.register_forward_hook(self._after_forward),
            self.optimizer.register_step_pre_hook(self._before_step),
            self.optimizer.register_step_post_hook(self._after_step),
        ]
        self.handles += [
            p.register_hook(self._param_hook(n))
            for n, p in self.model.named_parameters()
            if p.requires_grad
        ]
        for owner in (self.optimizer, self.model):
            self._wrap(owner, "zero_grad", lambda: self._log("zero_grads", "zero_grad"))
        if scheduler is not None:
            self._wrap(scheduler, "step", lambda: self._log("scheduler_steps", "scheduler"))
        if scaler is not None:
            for method in SCALER_METHODS:
                self._wrap_scaler(scaler, method)

    def begin_epoch(self, epoch: int, pairs: list) -> None:
        """Epoch `epoch` is about to get `pairs`: its micro-batch i is number epoch * n + i."""
        n = len(self.batches)
        self.epoch = epoch
        self.held.append(pairs)
        self.by_id.update({id(x): epoch * n + i for i, (x, _) in enumerate(pairs)})
        self.rec.epoch_starts.append(self.rec.position)
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        self.rec.carried_in.append(float(sum(float(g.double().norm()) ** 2 for g in grads) ** 0.5))
        self.rec.events.append(("epoch", self.rec.position))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()

    @staticmethod
    def _wrap(obj, name: str, before: Callable) -> None:
        """Replace `obj.name` on this instance only, so the original class stays untouched."""
        original = getattr(obj, name)

        def wrapper(*args, **kwargs):
            before()
            return original(*args, **kwargs)

        setattr(obj, name, wrapper)

    def _wrap_scaler(self, scaler, method: str) -> None:
        original = getattr(scaler, method)

        def wrapper(*args, **kwargs):
            self.budget.spend("scaler_calls")
            self.rec.scaler_calls.append((method, self.rec.position, float(scaler.get_scale())))
            self.rec.events.append((f"scaler.{method}", self.rec.position))
            steps = len(self.rec.steps)
            try:
                out = original(*args, **kwargs)
            except Exception:
                self.error_where = self.error_where or f"scaler.{method}"
                raise
            target = args[0] if args else kwargs.get("optimizer")
            if method == "step" and len(self.rec.steps) == steps and target is self.optimizer:
                # scaler.step found inf/NaN and skipped optimizer.step(): still the window's end
                self.params_before = params_of(self.model)
                self._after_step(self.optimizer, (), {}, skipped=True)
            return out

        setattr(scaler, method, wrapper)

    def _log(self, kind: str, event: str) -> None:
        self.budget.spend(kind)
        getattr(self.rec, kind).append(self.rec.position)
        self.rec.events.append((event, self.rec.position))

    # ------------------------------------------------------------------ forward
    def _identify(self, x):
        """Index of the micro-batch whose inputs are `x`; None when `x` is not one of them."""
        if not isinstance(x, torch.Tensor):
            return None
        if id(x) in self.by_id:
            return self.by_id[id(x)]
        for i, mb in enumerate(self.batches):  # moved or cast by the loop: compare values
            if _holds_rows(mb.x, x):
                return self.epoch * len(self.batches) + i  # the epoch running now
        return None

    def _on_forward(self, _module, args, kwargs):
        if not torch.is_grad_enabled():  # a no_grad forward (logging, evaluation) adds no gradient
            return
        self.budget.spend("forwards")
        first = _first_tensor([*args, *kwargs.values()])  # model(x) or model(input=x)
        if first is not None and first.device.type == "cpu" and torch.is_autocast_enabled("cuda"):
            self.rec.idle_autocast += 1
        b = self._identify(first)
        if b is None or b not in self.seen:
            self.pending.append(b)
            if b is not None:
                self.seen.add(b)
        # graphs of earlier forwards still alive that backward has not reached yet: whether the
        # loop keeps a window's graphs together (one backward for several forwards)
        waiting = [t() for t in self.tags]
        # every earlier graph still alive, reached before or not (retain_graph=True): graphs a
        # later backward still uses were held together with this one
        self.rec.alive_at_forward.append(tuple(t.forward for t in waiting if t is not None))
        self.rec.waiting_at_forward.append(
            tuple(
                t.forward
                for t in waiting
                if t is not None and t.forward not in self.rec.backpropagated
            )
        )
        self.rec.forwards.append(b)
        self.rec.events.append(("forward", self.rec.position))

    def _after_forward(self, _module, _args, output):
        if not torch.is_grad_enabled():
            return
        out = _first_tensor(output)
        if out is None:
            return
        forward = len(self.rec.forwards) - 1
        if self.rec.first_nonfinite_output is None and not bool(torch.isfinite(out).all()):
            self.rec.first_nonfinite_output = (forward, self.rec.forwards[-1])
        # every tensor returned (a loss and logits, say): backward may start from any of them
        nodes = {id(t.grad_fn): t.grad_fn for t in _tensors(output) if t.grad_fn is not None}
        if nodes:
            tag = _GraphTag(forward, len(self.rec.steps), self._on_backward)
            for node in nodes.values():
                node.register_prehook(tag)
            self.rec.tagged.add(forward)
            self.tags.append(weakref.ref(tag))

    def _on_backward(self, forward: int, finite: bool) -> None:
        running = self._backward_running()
        running["tagged"] = True
        running["forwards"].add(forward)
        self.rec.backpropagated.add(forward)
        self.rec.last_reached[forward] = len(self.rec.forwards)  # forwards done by then
        if not finite:  # into the step recorded next: one scaler.step may skip (GradScaler)
            self.rec.nonfinite_backward_steps.add(len(self.rec.steps))
        if not finite and self.rec.first_nonfinite_backward is None:
            self.rec.first_nonfinite_backward = (forward, self.rec.forwards[forward])

    # ------------------------------------------------------------------ backward passes
    def _backward_running(self) -> dict:
        """The backward pass now running; its end is queued as a callback of autograd's engine."""
        if self.backward is None:
            self.backward = {
                "tagged": False,
                "norm2": 0.0,
                "forwards": set(),
                "added": {},
            }
            torch.autograd.Variable._execution_engine.queue_callback(self._backward_done)
        return self.backward

    def _param_hook(self, name: str) -> Callable:
        def hook(grad):
            if grad is not None:  # this backward's contribution, before it is added to .grad
                running = self._backward_running()
                g = grad.detach().double().cpu()
                running["norm2"] += float(g.norm()) ** 2
                added = running["added"]
                added[name] = added[name] + g if name in added else g.clone()
            return None

        return hook

    def _backward_done(self) -> None:
        done, self.backward = self.backward, None
        if done is None:
            return
        if not done["tagged"] and done["norm2"] != 0:  # NaN counts
            # gradient through no graph the model's own call built: model.forward(x), a submodule
            self.rec.untracked.append((self.rec.position, done["norm2"] ** 0.5))
        self.rec.backwards.append(
            BackwardRecord(
                step=len(self.rec.steps),
                forwards=tuple(sorted(done["forwards"])),
                added=done["added"],
                finite=math.isfinite(done["norm2"]),
            )
        )

    # ------------------------------------------------------------------ optimizer step
    def _before_step(self, _opt, _args, _kwargs):
        self.budget.spend("steps")
        self.params_before = params_of(self.model)

    def _after_step(self, opt, _args, _kwargs, skipped: bool = False):
        index = len(self.rec.steps)
        alive = [t() for t in self.tags]
        self.rec.steps.append(
            StepRecord(
                index=index,
                window=tuple(self.pending),
                position=self.rec.position,
                grads=grads_of(self.model),
                params=self.params_before,
                lr=float(opt.param_groups[0]["lr"]),
                scale=float(self.scaler.get_scale()) if self.scaler is not None else None,
                norm_updates=_norm_updates(self.model),
                old_graphs=sum(t is not None and t.step < index for t in alive),
                saved_bytes=self.live_saved.bytes,
                epoch=self.epoch,
                skipped=skipped,
            )
        )
        self.rec.events.append(("step", self.rec.position))
        self.pending = []


def _holds_rows(whole: torch.Tensor, x: torch.Tensor) -> bool:
    """`x` is `whole`, or consecutive rows of it: a micro-batch the loop split into several
    forwards still counts as that one micro-batch (its gradient is checked as usual)."""
    if x.dim() == 0 or x.shape[1:] != whole.shape[1:] or not 0 < len(x) <= len(whole):
        return False
    part, rows = x.detach().cpu(), whole.to(x.dtype)
    fits = len(rows) - len(part) + 1  # the first rows a slice as long as x can start at
    starts = (rows[:fits] == part[0]).reshape(fits, -1).all(1).nonzero()
    return any(torch.equal(rows[s : s + len(part)], part) for s in starts.flatten().tolist())
