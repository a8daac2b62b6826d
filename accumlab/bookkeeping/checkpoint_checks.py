"""What a checkpoint must hold before a run resumes from it (lesson 10): every key, and values a
run of its own setup could have written — counters inside the run, the step counter that goes
with the data position, weights and gradients of the model's names and shapes, finite numbers,
RNG states of the generator's size. A checkpoint edited by hand (the lesson invites it) is
refused with what is wrong, before a resume runs into NaN weights, a wrong data position or an
error from inside `load_state_dict`.
"""

from __future__ import annotations

import torch

from .._validate import finite_tensors, positive_int
from .loop import Loop, Setup

CHECKPOINT_KEYS = (
    "setup",
    "micro_step",
    "step",
    "model",
    "optimizer",
    "scheduler",
    "torch_rng",
    "sampler_epoch_start",
    "grads",
    "window",
)
WINDOW_KEYS = ("loss_sum", "count", "scaled", "last_scaled", "unscaled")


def check_checkpoint(checkpoint) -> Setup:
    """The checkpoint's own Setup, once every value has been checked against it."""
    if not isinstance(checkpoint, dict):
        raise ValueError(f"checkpoint must be a dict, got {type(checkpoint).__name__}")
    missing = [k for k in CHECKPOINT_KEYS if k not in checkpoint]
    if missing:
        raise ValueError(
            f"checkpoint is missing {', '.join(missing)}; got keys {sorted(checkpoint)}"
        )
    saved = _setup(checkpoint["setup"])
    for key in ("model", "optimizer", "scheduler", "grads", "window"):
        _mapping(key, checkpoint[key])
    # a NaN weight, moment, learning rate or partial gradient would resume into NaNs without a word
    for key in ("model", "optimizer", "scheduler", "grads", "window"):
        finite_tensors(f"checkpoint[{key!r}]", checkpoint[key])
    schedule = saved.schedule()
    micro_step = positive_int(
        "checkpoint['micro_step']",
        checkpoint["micro_step"],
        minimum=0,
        maximum=schedule.micro_steps - 1,
        why=f"a micro-step inside its setup's run of {schedule.micro_steps}",
    )
    # the step counter must be the one the data position implies: resuming rules derive one
    # from the other ("rewind, interruption's RNG"), and a mismatch would resume somewhere else
    taken = sum(schedule.ends_window()[:micro_step])
    step = checkpoint["step"]
    if positive_int("checkpoint['step']", step, minimum=0) != taken:
        raise ValueError(
            f"checkpoint['step'] = {step!r}, but a run of its setup has taken {taken} optimizer "
            f"steps after micro_step={micro_step}"
        )
    size = torch.get_rng_state().numel()
    for key in ("torch_rng", "sampler_epoch_start"):
        state = checkpoint[key]
        if not (isinstance(state, torch.Tensor) and state.dtype == torch.uint8) or (
            state.shape != (size,)
        ):
            raise ValueError(
                f"checkpoint[{key!r}] must be a CPU generator's state (torch.get_rng_state(): "
                f"{size} bytes of dtype uint8), got {_described(state)}"
            )
    unknown = [k for k in checkpoint["window"] if k not in WINDOW_KEYS]
    if unknown or any(k not in checkpoint["window"] for k in WINDOW_KEYS):
        raise ValueError(
            f"checkpoint['window'] must hold the running sums {', '.join(WINDOW_KEYS)}, got "
            f"keys {sorted(checkpoint['window'])}"
        )
    return saved


def check_loadable(checkpoint: dict, loop: Loop) -> None:
    """Weights and gradients of `loop`'s model: the same names, shapes and dtypes."""
    expected = loop.model.state_dict()
    _same_tensors("model", checkpoint["model"], expected, every=True)
    params = dict(loop.model.named_parameters())
    _same_tensors("grads", checkpoint["grads"], params, every=False)
    for key, value in checkpoint["optimizer"].get("state", {}).items():
        if not isinstance(value, dict):
            raise ValueError(f"checkpoint['optimizer']['state'][{key!r}] must be a dict")
        for name, t in value.items():
            if t is None:  # a momentum buffer not made yet
                continue
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else None
            if shape not in ((), *(tuple(p.shape) for p in params.values())):
                raise ValueError(
                    f"checkpoint['optimizer']['state'][{key!r}][{name!r}] is {_described(t)}, "
                    "the shape of no parameter of the model"
                )


def load(what: str, target, state: dict) -> None:
    """`target.load_state_dict(state)`, its refusal said as checkpoint[what]'s."""
    try:
        target.load_state_dict(state)
    except (KeyError, ValueError, TypeError, RuntimeError, IndexError) as err:
        raise ValueError(
            f"checkpoint[{what!r}] does not load into the setup's {type(target).__name__}: "
            f"{type(err).__name__}: {err}"
        ) from None


def _setup(value) -> Setup:
    if not isinstance(value, dict):
        raise ValueError(
            f"checkpoint['setup'] must be the dict of a Setup's fields (dataclasses.asdict), got "
            f"{_described(value)}"
        )
    try:
        return Setup(**value)
    except TypeError as err:  # a key that is not a field of Setup
        raise ValueError(f"checkpoint['setup'] is not a Setup's fields: {err}") from None
    except ValueError as err:
        raise ValueError(f"checkpoint['setup']: {err}") from None


def _mapping(key: str, value) -> None:
    if not isinstance(value, dict):
        raise ValueError(f"checkpoint[{key!r}] must be a dict, got {_described(value)}")


def _same_tensors(key: str, given: dict, expected: dict, *, every: bool) -> None:
    missing = [n for n in expected if n not in given] if every else []
    unknown = [n for n in given if n not in expected]
    if missing or unknown:
        raise ValueError(
            f"checkpoint[{key!r}] must name the model's parameters {sorted(expected)}; missing "
            f"{missing}, unknown {unknown}"
        )
    for name, t in given.items():
        want = expected[name]
        if not isinstance(t, torch.Tensor) or t.shape != want.shape or t.dtype != want.dtype:
            raise ValueError(
                f"checkpoint[{key!r}][{name!r}] must be a tensor of shape {tuple(want.shape)} and "
                f"dtype {want.dtype}, got {_described(t)}"
            )


def _described(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    return f"{type(value).__name__} {value!r:.60}"
