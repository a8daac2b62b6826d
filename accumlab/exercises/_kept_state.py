"""What an answer may change for the rest of the kernel, kept around every check: grad mode, the
default dtype and device, CPU autocast, anomaly mode, and the functions checkers compare with (a
replaced `torch.allclose` that always agrees would pass any answer)."""

from __future__ import annotations


def _genuine() -> list[tuple[object, str, object]]:
    """(owner, name, torch's own function) for each comparison the checkers use: read from torch's
    C bindings and its private module, which a replacement of the public names leaves alone."""
    import torch
    import torch.testing._comparison as comparison

    functions = torch._C._VariableFunctions
    return [
        (torch, "allclose", functions.allclose),
        (torch, "equal", functions.equal),
        (torch, "isclose", functions.isclose),
        (torch.Tensor, "allclose", torch._C.TensorBase.allclose),
        (torch.Tensor, "equal", torch._C.TensorBase.equal),
        (torch.testing, "assert_close", comparison.assert_close),
    ]


def _device_context():
    """The mode `torch.set_default_device` installs (None without one): restoring "cpu" by name
    would install a mode where there was none."""
    import torch

    return getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)


def _label(owner, name: str) -> str:
    return f"{getattr(owner, '__name__', owner)}.{name}"


class KeptState:
    """`with KeptState() as kept:` around a check. On entry autograd is switched on (a kernel left
    under `set_grad_enabled(False)` would fail right answers) and torch's own comparison functions
    are in place (`kept.replaced_before` names those replaced earlier in the kernel); on exit
    everything is put back as it was found, and `kept.replaced` names the comparisons the answer
    replaced, `kept.grad_off` says whether it left autograd off."""

    def __enter__(self) -> KeptState:
        import torch

        self._grad, self._dtype = torch.is_grad_enabled(), torch.get_default_dtype()
        self._device, self._anomaly = _device_context(), torch.is_anomaly_enabled()
        self._autocast = torch.is_autocast_enabled("cpu")
        self._found, self.replaced_before = [], []
        for owner, name, genuine in _genuine():
            found, own = getattr(owner, name), name in vars(owner)
            self._found.append((owner, name, genuine, found, own))
            if found is not genuine:
                self.replaced_before.append(_label(owner, name))
                setattr(owner, name, genuine)
        torch.set_grad_enabled(True)
        return self

    def __exit__(self, *exc) -> None:
        import torch

        self.grad_off = not torch.is_grad_enabled()
        torch.set_grad_enabled(self._grad)
        torch.set_default_dtype(self._dtype)
        if _device_context() is not self._device:  # set_default_device, not undone
            torch.set_default_device(None if self._device is None else self._device.device)
        torch.set_anomaly_enabled(self._anomaly)
        torch.set_autocast_enabled("cpu", self._autocast)  # an autocast entered, never left
        self.replaced = []
        for owner, name, genuine, found, own in self._found:
            if getattr(owner, name, None) is not genuine:
                self.replaced.append(_label(owner, name))
            if found is not genuine or own:
                setattr(owner, name, found)  # as the kernel had it, a replacement made before too
            elif name in vars(owner):  # inherited (Tensor.allclose from the C base)
                delattr(owner, name)
