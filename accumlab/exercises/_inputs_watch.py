"""What lesson 13.2's checker watches: .grad accumulating, and a micro-batch's x that notes every
computation made with it outside the model's forward, with stand-ins for the switches that would
turn that noting off.
It sees computations made through torch's Python dispatch; reading the raw memory (ctypes, a
DLPack capsule taken inside the forward) is beyond it."""

from __future__ import annotations

import sys

import torch

SHAPE_ONLY = {"__len__", "size", "dim", "numel", "__repr__", "__str__", "__format__"}
ATTRIBUTES = {"shape", "dtype", "device", "ndim", "requires_grad", "is_leaf", "grad_fn", "layout"}
# results that are the same numbers (a copy, a cast, a view or reshape): still watched
KEEP_WATCHING = {
    "to",
    "double",
    "float",
    "clone",
    "detach",
    "contiguous",
    "cpu",
    "view",
    "view_as",
    "reshape",
    "reshape_as",
    "flatten",
    "squeeze",
    "unsqueeze",
    "requires_grad_",
}


_DISABLE = torch._C.DisableTorchFunctionSubclass  # bound here: the watcher's own use


class _Watched:
    """While the answer runs, stands for torch._C.DisableTorchFunctionSubclass and
    DisableTorchFunction: a use from the answer's code (not torch's, not accumlab's) is noted, as
    it would hide computations with the inputs from `_Inputs`."""

    def __init__(self, original, name: str):
        self.original, self.name = original, name

    def __call__(self, *args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if not caller.startswith(("torch", "accumlab")) and not _Inputs.watch["inside"]:
            _Inputs.watch["outside"].append(self.name)
        return self.original(*args, **kwargs)


class _Inputs(torch.Tensor):
    """A micro-batch's x that notes every computation made with it outside the model's forward."""

    watch: dict = {"inside": 0, "outside": []}

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name == "__get__":  # an attribute: x.shape is a question, x.T a computation
            name = getattr(getattr(func, "__self__", None), "__name__", name)
        allowed = name in SHAPE_ONLY or name in ATTRIBUTES or name in KEEP_WATCHING
        if not cls.watch["inside"] and not allowed:
            cls.watch["outside"].append(name)
        with _DISABLE():
            out = func(*args, **(kwargs or {}))
        return out.as_subclass(cls) if name in KEEP_WATCHING else out


def _accumulated(grad_states: list, k: int) -> str | None:
    """The hint when .grad did not accumulate within windows and start empty at each window."""
    starts = grad_states[::k]
    inside = [s for i, s in enumerate(grad_states) if i % k]
    if not all(inside):
        return (
            f".grad was empty (None or zero) at {inside.count(False)} of the {len(inside)} "
            "micro-batches after each window's first: accumulation lets .grad sum the window's k "
            "backwards (read each micro-batch's share as the change of .grad), zeroing only "
            "between windows"
        )
    if any(starts[1:]):
        return (
            f".grad still held gradients when {sum(starts[1:])} of the windows began: zero .grad "
            "after each window, as an accumulation loop does after its optimizer step"
        )
    return None
