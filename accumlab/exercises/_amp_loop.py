"""Watching an AMP training loop through its gradients (exercise 06.3): what each backward found
in `.grad`, the weights at each backward, what the optimizer stepped on and with which lr, and how
the GradScaler was used; `run_observed` runs an answer under all of it (`_amp_judge` judges).

Clipping is seen in the gradients, not by patching one binding of `clip_grad_norm_`: an answer
that imported it under its own name, or used `get_total_norm` + `clip_grads_with_norm_`, or
rescaled `.grad` by hand, clips all the same. Steps are counted only for optimizers over the
model's own parameters, so a loop that trains a copy and writes its weights back makes none.
"""

from __future__ import annotations

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from ._graph_watch import OutputGradients
from ._observe import Observe, Refuse, Spy, _graph_task


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, NaN for NaN: after an overflowing micro-batch `.grad` holds NaNs that later
    backwards leave as they are."""
    return a.shape == b.shape and bool(
        torch.isclose(a, b, rtol=0.0, atol=0.0, equal_nan=True).all()
    )


class GradWatch:
    """`with GradWatch(model) as watch: answer(...)`, then read, per backward pass over the model
    (in order): `watch.found[b]` — what `.grad` held when backward b began adding to it: "empty"
    (None or zero), "kept" (what backward b-1 left, infs and NaNs included) or "changed" (rescaled
    or replaced since); `watch.weights[b]` — the model's weights when backward b began;
    `watch.step_norms`, `watch.step_lrs` — the total `.grad` norm and the first group's lr at each
    `optimizer.step()` over the model's parameters, `watch.optimizers` the optimizers stepped and
    `watch.step_settings` their param groups' settings (all but "params") at each of those steps;
    `watch.last_norms` — the norm backward by
    backward, after it wrote `.grad`."""

    def __init__(self, model: torch.nn.Module):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.ids = {id(p) for p in self.params}
        self.found: list[str] = []
        self.step_norms: list[float] = []
        self.step_lrs: list[float] = []
        self.optimizers: list[torch.optim.Optimizer] = []
        self.step_settings: list[list[dict]] = []
        self.weights: list[list[torch.Tensor]] = []
        self.last_norms: list[float] = []
        self._task = None
        self._left: dict[int, torch.Tensor] = {}  # .grad as the last backward left it
        self._handles: list = []

    def _before(self, p):
        def hook(grad):
            task = _graph_task()
            if task != self._task:  # the first parameter this backward reaches
                self._task = task
                self.found.append("kept")
                self.weights.append([q.detach().clone() for q in self.params])
            now, left = p.grad, self._left.get(id(p))
            if now is None or not bool(now.any()):
                state = "empty"
            elif left is not None and _same(now, left):
                state = "kept"
            else:
                state = "changed"
            if state != "kept" and self.found[-1] != "changed":
                self.found[-1] = state
            return grad

        return hook

    def _after(self, p):
        self._left[id(p)] = p.grad.detach().clone()
        self.last_norms.append(self._norm())

    def _norm(self) -> float:
        grads = [p.grad.detach().double() for p in self.params if p.grad is not None]
        return float(sum(g.pow(2).sum() for g in grads)) ** 0.5

    def _on_step(self, optimizer, args, kwargs):
        if any(id(p) in self.ids for g in optimizer.param_groups for p in g["params"]):
            self.step_norms.append(self._norm())
            self.step_lrs.append(float(optimizer.param_groups[0]["lr"]))
            # read as the step runs: settings changed after the run do not hide what it used
            self.step_settings.append(
                [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
            )
            if all(o is not optimizer for o in self.optimizers):
                self.optimizers.append(optimizer)

    def __enter__(self) -> GradWatch:
        for p in self.params:
            self._handles.append(p.register_hook(self._before(p)))
            self._handles.append(p.register_post_accumulate_grad_hook(self._after))
        self._handles.append(register_optimizer_step_pre_hook(self._on_step))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def window_norms(self) -> list[float]:
        """The norm of `.grad` after each backward (the last parameter it wrote)."""
        n = len(self.params)
        return self.last_norms[n - 1 :: n]


class ScalerWatch:
    """Wraps `GradScaler.scale` while the block runs: `watch.disabled` counts calls on a scaler
    built with enabled=False, `watch.calls` all of them; `watch.reached` counts the calls whose
    output a backward went through (a hook on it: a dummy `scaler.scale(torch.zeros(()))`, or a
    scaled loss only logged with `.item()`, has a graph or not but no backward), and
    `watch.backed_scales` holds the scale each of those multiplied by, in call order (so the scale
    can be judged window by window); `watch.scalers` the enabled scalers that scaled (kept alive,
    so one built per window cannot reuse another's id)."""

    def __init__(self):
        self.calls = self.disabled = 0
        self._records: list[list] = []  # per call: [scale, or None when disabled; reached?]
        self.scalers: list[torch.amp.GradScaler] = []

    @property
    def reached(self) -> int:
        return sum(hit for _, hit in self._records)

    @property
    def backed_scales(self) -> list[float]:
        return [s for s, hit in self._records if hit and s is not None]

    def __enter__(self) -> ScalerWatch:
        self._original = torch.amp.GradScaler.scale
        original = self._original

        def scale(scaler, outputs):
            self.calls += 1
            self.disabled += not scaler.is_enabled()
            record = [float(scaler.get_scale()) if scaler.is_enabled() else None, False]
            self._records.append(record)
            if scaler.is_enabled() and all(s is not scaler for s in self.scalers):
                self.scalers.append(scaler)
            scaled = original(scaler, outputs)
            tensors = [scaled] if isinstance(scaled, torch.Tensor) else scaled
            for t in tensors if isinstance(tensors, (list, tuple)) else ():
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    t.register_hook(lambda grad, r=record: r.__setitem__(1, True))
            return scaled

        torch.amp.GradScaler.scale = scale
        return self

    def __exit__(self, *exc) -> None:
        torch.amp.GradScaler.scale = self._original


class _InfBackward(torch.autograd.Function):
    """Identity forward; backward multiplies the incoming gradient by inf (0 · inf = NaN, also
    non-finite), as the scaled backward of a float16 overflow does."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * float("inf")


def overflow_on(model: torch.nn.Module, xs) -> list:
    """Make the backward of the forwards of the inputs `xs` inf, as a float16 overflow in the
    scaled backward would: the data, the output and the loss stay finite, so a loop can learn of
    it only from the gradients or the scaler. Layers called one by one overflow too (first and
    last leaf). Returns the hook handles."""
    from ._observe import _rows_key

    keys = {_rows_key(x) for x in xs}
    leaves = [m for m in model.modules() if not any(True for _ in m.children())]
    hit = [False]

    def enter(module, args):
        x = next((a for a in args if isinstance(a, torch.Tensor)), None)
        hit[0] = x is not None and _rows_key(x) in keys

    def leave(module, args, output):
        if hit[0] and isinstance(output, torch.Tensor) and output.requires_grad:
            return _InfBackward.apply(output)  # same values; the watchers see its own gradient
        return None

    return [
        leaves[0].register_forward_pre_hook(enter),
        leaves[-1].register_forward_hook(leave),
    ]


def _dtype_probes(model: torch.nn.Module, dtypes: list) -> list:
    """Record (name, output dtype) of every leaf module that holds parameters, in forwards with a
    graph only: autocast around the first layer alone leaves the others in float32, and a
    no_grad forward (a log) is no part of training."""

    def probe(name):
        def hook(module, args, out):
            if torch.is_grad_enabled() and isinstance(out, torch.Tensor):
                dtypes.append((name, out.dtype))

        return hook

    return [
        m.register_forward_hook(probe(f"layer {name or 'model'} ({type(m).__name__})"))
        for name, m in model.named_modules()
        if not any(True for _ in m.children()) and any(True for _ in m.parameters(recurse=False))
    ]


def run_observed(answer, model, batches, k, max_norm, make_scheduler, overflow=()):
    """Run the answer observed: its forwards and backward passes, what `.grad` held at each
    backward and at each step (GradWatch), the calls it made to GradScaler, its scheduler's steps,
    and the dtype each parametrised layer produced. The micro-batches listed in `overflow`
    overflow in backward (`overflow_on`). The answer gets its own copy of the list of batches."""
    import contextlib

    built = []  # (scheduler, its last_epoch when built)

    def counted_scheduler(opt):
        sched = make_scheduler(opt)
        built.append((sched, sched.last_epoch))
        return sched

    dtypes = []
    # before the watchers' hooks, so that their output is the overflowing one
    hooks = overflow_on(model, [batches[i][0] for i in overflow])
    hooks += _dtype_probes(model, dtypes)
    spies = {
        name: Spy(torch.amp.GradScaler, name, f"scaler.{name}")
        for name in ("unscale_", "step", "update")
    }
    refused = Refuse(
        "al.precision.amp_train",
        "al.exercises.lesson06.reference_train",
        "al.exercises.lesson06._reference_trace",
    )
    seen, grads, scale = Observe(model), GradWatch(model), ScalerWatch()
    arrived = OutputGradients(model)
    try:
        with refused, seen, grads, scale, arrived, contextlib.ExitStack() as stack:
            for spy in spies.values():
                stack.enter_context(spy)
            # a copy: an answer may consume its list (pop) without touching the checker's
            trained = answer(model, list(batches), k, max_norm, counted_scheduler)
    finally:
        for hook in hooks:
            hook.remove()
    counts = {name: spy.calls for name, spy in spies.items()}
    seen.arrived = arrived  # the gradients each forward's output received
    # read from the schedulers' own count, which every route to step() advances
    # (`type(sched).step(sched)` included), not from a wrapper on one binding
    sched_steps = sum(s.last_epoch - start for s, start in built)
    return trained, counts, seen, grads, scale, sched_steps, dtypes
