"""Argument checks for torch objects — dtypes, devices, models, data — said in accumlab's words.
Part of `_validate` (which re-exports these names); torch is imported inside each function, so
importing the checks stays cheap."""

from __future__ import annotations

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def float_dtype(name: str, value):
    import torch

    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        hint = f" (write torch.{value})" if isinstance(value, str) and value in FLOAT_DTYPES else ""
        raise ValueError(
            f"{name} must be a floating torch dtype such as torch.float64 or torch.float32, "
            f"got {value!r}{hint}"
        )
    return value


def device(name: str, value):
    """A torch.device that exists on this machine ('cpu', 'cuda', 'cuda:1', ...)."""
    import torch

    if isinstance(value, torch.device):
        dev = value
    elif isinstance(value, str):
        try:
            dev = torch.device(value)
        except RuntimeError:
            hint = f" (a dtype? write torch.{value})" if value in FLOAT_DTYPES else ""
            raise ValueError(
                f"{name} must be a device such as 'cpu' or 'cuda', got {value!r}{hint}"
            ) from None
    else:
        raise ValueError(f"{name} must be a device such as 'cpu' or 'cuda', got {value!r}")
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = " (this torch is a CPU-only build)" if torch.version.cuda is None else ""
            raise ValueError(
                f"{name}={value!r}: no CUDA device on this machine{build}; use 'cpu' (al.setup() "
                "reports the device it found as env.device)"
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise ValueError(f"{name}={value!r}: this machine has {count} CUDA device(s)")
        return dev
    if dev.type == "mps" and torch.backends.mps.is_available():
        return dev
    raise ValueError(f"{name}={value!r}: not a device on this machine; use 'cpu' or 'cuda'")


def first_non_finite(t) -> tuple[tuple[int, ...], float] | None:
    """Index and value of the first NaN/inf in a floating tensor, or None."""
    import torch

    if not t.is_floating_point() and not t.is_complex():
        return None
    if bool(torch.isfinite(t.detach()).all()):  # the usual case: one pass, no index search
        return None
    bad = ~torch.isfinite(t.detach())
    index = tuple(int(i) for i in bad.nonzero()[0])
    return index, float(t.detach()[index])


def model(name: str, value):
    """A torch.nn.Module with at least one trainable parameter, all of them finite."""
    import torch
    from torch import nn

    if not isinstance(value, nn.Module):
        raise ValueError(
            f"{name} must be a torch.nn.Module such as al.mlp(), got "
            f"{type(value).__name__} {value!r:.60}"
        )
    params = list(value.named_parameters())
    if not params:
        raise ValueError(
            f"{name} ({type(value).__name__}) has no parameters: backward would have nothing to "
            "fill and the optimizer nothing to update"
        )
    if not any(p.requires_grad for _, p in params):
        raise ValueError(
            f"every parameter of {name} is frozen (requires_grad=False): backward would leave no "
            "gradient; unfreeze some with p.requires_grad_(True)"
        )
    # one sum per parameter (in float64, so no float16 overflow): NaN or inf anywhere survives it
    sums = torch.stack([p.detach().sum(dtype=torch.float64) for _, p in params])
    for pname, p in params if not bool(sums.isfinite().all()) else ():
        bad = first_non_finite(p)
        if bad is not None:
            raise ValueError(
                f"{name} parameter {pname!r} holds {bad[1]} at index {bad[0]}: every gradient and "
                "loss computed from it would be NaN; rebuild or re-initialise the model"
            )
    return value


def data(name: str, value, *, finite: bool = True):
    """An accumlab Data with at least one sample and (by default) no NaN/inf in x or y."""
    from .data import Data

    if not isinstance(value, Data):
        raise ValueError(
            f"{name} must be an accumlab Data(x, y) such as al.regression_data(), got "
            f"{type(value).__name__} {value!r:.60}"
        )
    if len(value) == 0:
        raise ValueError(f"{name} holds no samples (len(x) == 0)")
    if finite:
        for part in ("x", "y"):
            bad = first_non_finite(getattr(value, part))
            if bad is not None:
                raise ValueError(
                    f"{name}.{part} holds {bad[1]} at index {bad[0]} (sample {bad[0][0]}): NaN or "
                    "inf in the data makes the loss and every gradient NaN; clean or drop it"
                )
    return value


def _described(value) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"a {type(value).__name__} of shape {tuple(value.shape)} and dtype {value.dtype}"
    return f"{type(value).__name__} {value!r:.60}"


def tensor(name: str, value, *, dim: int | None = None, floating: bool = False, finite=False):
    """A torch.Tensor (with `dim` dimensions, a floating dtype, no NaN/inf, when asked)."""
    import torch

    wanted = f"a {dim}-d tensor" if dim is not None else "a tensor"
    if not isinstance(value, torch.Tensor) or (dim is not None and value.dim() != dim):
        raise ValueError(f"{name} must be {wanted}, got {_described(value)}")
    if floating and not value.is_floating_point():
        raise ValueError(f"{name} must hold floating-point numbers, got dtype {value.dtype}")
    bad = first_non_finite(value) if finite else None
    if bad is not None:
        raise ValueError(
            f"{name} holds {bad[1]} at index {bad[0]}: every number computed from it would be "
            "NaN or infinite"
        )
    return value


def tensor_dict(name: str, value) -> dict:
    """A non-empty dict from parameter names to tensors (gradients, weights, updates)."""
    import torch

    if not isinstance(value, dict) or not value:
        raise ValueError(
            f"{name} must be a non-empty dict from parameter names to tensors (as "
            f"al.grads_of(model) returns), got {_described(value)}"
        )
    for key, t in value.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name}[{key!r}] must be a tensor, got {_described(t)}")
    return value


def optimizer(name: str, value):
    """A torch.optim.Optimizer (an object, not the name of one)."""
    import torch

    if not isinstance(value, torch.optim.Optimizer):
        hint = " (a name: build one with al.make_optimizer(name, model.parameters()))"
        raise ValueError(
            f"{name} must be a torch.optim.Optimizer, got {_described(value)}"
            + (hint if isinstance(value, str) else "")
        )
    return value


def finite_tensors(name: str, value, *, _path: str = ""):
    """Every floating tensor and every number inside a (nested) mapping or sequence is finite —
    a checkpoint's state dicts, an optimizer's state (its `lr` is a Python float), a scheduler's
    `base_lrs`: a NaN there resumes silently into NaN weights."""
    import math
    import numbers

    import torch

    where = f"{name}{_path}"
    if isinstance(value, torch.Tensor):
        bad = first_non_finite(value)
        if bad is not None:
            raise ValueError(
                f"{where} holds {bad[1]} at index {bad[0]}: every number computed from it would "
                "be NaN or infinite"
            )
    elif isinstance(value, numbers.Real) and not math.isfinite(value):
        raise ValueError(
            f"{where} is {value!r}: every number computed from it would be NaN or infinite"
        )
    elif isinstance(value, dict):
        for key, item in value.items():
            finite_tensors(name, item, _path=f"{_path}[{key!r}]")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            finite_tensors(name, item, _path=f"{_path}[{i}]")
    return value
