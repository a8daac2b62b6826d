"""Tensors that lie to the comparisons a checker makes with them (lessons 02–04's corpora)."""

import torch


class AlwaysClose(torch.Tensor):
    """A tensor whose comparisons all answer yes: allclose, equal, bool, float."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("allclose", "equal", "__bool__"):
            return True
        if name in ("__float__", "item"):
            return 1.0
        return super().__torch_function__(func, types, args, kwargs or {})
