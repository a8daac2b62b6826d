"""What exercise 09.3's checker compares an EMA loop with: the lesson's own EMA run, the window's
mean gradient, and `.grad` as the optimizer steps."""

from __future__ import annotations

import copy

import torch


def ema_reference(model, data, micro_batch_size, k):
    from ..coupling.ema import ema_run

    run = ema_run(model, data, micro_batch_size, k, beta=0.9, lr=0.05)
    return run["params"][-1], run["ema"][-1]


def flat(tensors: dict) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for _, t in sorted(tensors.items())])


def flat_grads(params) -> torch.Tensor:
    return torch.cat(
        [(torch.zeros_like(p) if p.grad is None else p.grad).reshape(-1) for p in params]
    )


def window_mean_grad(model, micro_batches) -> torch.Tensor:
    """The gradient of the mean of the window's micro-batch MSE means, at the model's weights."""
    twin = copy.deepcopy(model)
    twin.zero_grad(set_to_none=True)
    for mb in micro_batches:
        (torch.nn.functional.mse_loss(twin(mb.x), mb.y) / len(micro_batches)).backward()
    return flat_grads(list(twin.parameters()))


class GradAtStep:
    """Records `.grad` each time the optimizer steps, by a step post-hook, which every route to
    the step runs (`optimizer.step()`, `type(optimizer).step(optimizer)`), after a closure has
    computed the gradient and before the answer's zero_grad. The weights alone cannot
    tell the mean's gradient from the sum's with the learning rate divided by k (the same SGD
    step); an optimizer that normalises the gradient (Adam) would then move k times less far."""

    def __init__(self, optimizer, params):
        self.optimizer, self.params, self.seen = optimizer, params, []

    def __enter__(self):
        def record(optimizer, args, kwargs):
            self.seen.append(flat_grads(self.params).clone())

        self._handle = self.optimizer.register_step_post_hook(record)
        # first among the post-hooks: one the answer registered earlier (a zero_grad) runs after
        hooks = getattr(self.optimizer, "_optimizer_step_post_hooks", None)
        if hooks is not None and self._handle.id in hooks:
            hooks.move_to_end(self._handle.id, last=False)
        return self

    def __exit__(self, *exc):
        self._handle.remove()
