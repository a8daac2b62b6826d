"""A fused optimizer under GradScaler (lesson 06). For an optimizer whose
`_step_supports_amp_scaling` is set (the fused ones) `GradScaler.step` finds the infs itself
(`_check_inf_per_device`, unless `unscale_` already did), sets `optimizer.grad_scale` (the scale, or
None once `unscale_` has run) and `optimizer.found_inf`, and always calls `step`: the kernel divides
`.grad` by the scale and skips its own update (torch/amp/grad_scaler.py). So whatever detects a
skipped step by watching `optimizer.step()` being called - Accelerate's `step_was_skipped`, and the
Transformers Trainer's scheduler with it - sees none."""

from __future__ import annotations

import importlib.util
import math
import re

import torch

from .amp import amp_train

# name: (fused, explicit unscale_ + clip before scaler.step); without it scaler.step unscales
FUSED_RUNS = {
    "fused": (True, True),
    "default": (False, True),
    "fused, scaler.step unscales": (True, False),
    "default, scaler.step unscales": (False, False),
}


def _grad_norm(params) -> float:
    grads = [p.grad.detach().double() for p in params if p.grad is not None]
    return float(sum(g.pow(2).sum() for g in grads)) ** 0.5


def fused_runs(n: int, seed: int) -> dict:
    """Adam, fused and default, in the AMP loop of lesson 06 (one overflow at micro-step 5, so
    window 1 is skipped), each with and without an explicit `unscale_` (FUSED_RUNS). Per run and per
    call of `optimizer.step()`: the `grad_scale` and `found_inf` the scaler handed it (None: not
    set) and ‖.grad‖ before ÷ after the call (1: untouched; the scale: unscaled in the call)."""
    from ..data import regression_data
    from ..models import mlp

    data = regression_data(n=n, features=4, seed=seed, dtype=torch.float32)
    model = mlp(features=4, hidden=16, depth=2, seed=seed, dtype=torch.float32)
    runs, final = {}, {}
    for name, (fused, explicit) in FUSED_RUNS.items():
        calls, built = [], []

        def before(opt, args, kwargs, calls=calls):
            scale, inf = getattr(opt, "grad_scale", None), getattr(opt, "found_inf", None)
            calls.append(
                {
                    "grad_scale": None if scale is None else float(scale),
                    "found_inf": None if inf is None else float(inf),
                    "norm": _grad_norm(p for g in opt.param_groups for p in g["params"]),
                }
            )

        def after(opt, args, kwargs, calls=calls):
            now = _grad_norm(p for g in opt.param_groups for p in g["params"])
            calls[-1]["ratio"] = calls[-1]["norm"] / now if now and math.isfinite(now) else math.nan

        def build(params, fused=fused, built=built, before=before, after=after):
            opt = torch.optim.Adam(params, lr=1e-3, fused=fused)
            opt.register_step_pre_hook(before)
            opt.register_step_post_hook(after)
            built.append(opt)
            return opt

        trace = amp_train(
            model, data, micro_batch_size=4, accumulation_steps=4, optimizer=build,
            overflow_micro_steps=(5,), max_norm=1.0 if explicit else None, unscale=explicit,
        )  # fmt: skip
        opt = built[-1]
        runs[name] = {
            "supports_amp_scaling": bool(getattr(opt, "_step_supports_amp_scaling", False)),
            "update_norms": trace.update_norms,
            "step_calls": len(calls),
            "grad_scale": [c["grad_scale"] for c in calls],
            "found_inf": [c["found_inf"] for c in calls],
            "grad_ratio": [c["ratio"] for c in calls],
            # Adam's own step count (its bias correction): a skipped window must not advance it
            "adam_steps": int(max(float(s["step"]) for s in opt.state.values())),
        }
        final[name] = trace.params[-1]

    def gap(a: str, b: str) -> float:
        return max(float((final[a][p] - final[b][p]).abs().max()) for p in final[a])

    gaps = {
        "unscale_ + clip": gap("fused", "default"),
        "scaler.step unscales": gap("fused, scaler.step unscales", "default, scaler.step unscales"),
    }
    return {"runs": runs, "param_gaps": gaps}


def _source(module: str) -> str:
    """A module's source text, read without importing it ("" when it is not there)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return ""
    with open(spec.origin, encoding="utf-8") as f:
        return f.read()


def trainer_skip_check() -> dict:
    """What the installed Transformers Trainer does after a skipped step: its default optimizer
    (`TrainingArguments.optim`), whether that name builds `AdamW(fused=True)`, and whether its
    training loop steps the scheduler only `if not self.accelerator.optimizer_step_was_skipped`
    (read from the source, not imported: importing the Trainer takes seconds). Lesson 06."""
    import transformers
    from transformers import TrainingArguments

    default = TrainingArguments.__dataclass_fields__["optim"].default
    default = str(getattr(default, "value", default))
    trainer = _source("transformers.trainer")
    # where the optimizer is built: trainer_optimizer.py in recent versions, trainer.py before
    builder = _source("transformers.trainer_optimizer") + trainer
    # the `"fused": True` must be the statement under that name's test, not one of another branch
    fused_name = bool(
        re.search(r"optim == OptimizerNames\.ADAMW_TORCH_FUSED:\s*\n[^\n]*\"fused\": True", builder)
    )
    return {
        "version": transformers.__version__,
        "default_optim": default,
        "default_is_fused": default == "adamw_torch_fused" and fused_name,
        "holds_unless_skipped": "if not self.accelerator.optimizer_step_was_skipped" in trainer,
    }
