"""Solutions to lesson 02's exercises (kept apart from the lesson)."""

import torch.nn.functional as F


def accumulate(model, data, micro_batch_size):
    model.zero_grad()  # .grad arrives holding an earlier batch's gradient
    for mb in data.micro_batches(micro_batch_size):
        # the micro-batches' sums add up to the full batch's sum: nothing to divide
        F.mse_loss(model(mb.x), mb.y, reduction="sum").backward()


def accumulate_mean(model, data, micro_batch_size):
    """The lesson's loop for a mean loss: the gradient of the sum ÷ len(data)."""
    micro_batches = data.micro_batches(micro_batch_size)
    model.zero_grad()
    for mb in micro_batches:
        (F.mse_loss(model(mb.x), mb.y) / len(micro_batches)).backward()


class EveryKth:
    """step() and zero_grad() reach the optimizer only when a window of k micro-batches is complete
    (Accelerate's AcceleratedOptimizer checks `gradient_state.sync_gradients` the same way)."""

    def __init__(self, optimizer, k):
        self.optimizer, self.k, self.micro_batches = optimizer, k, 0

    def step(self):
        self.micro_batches += 1
        if self.micro_batches % self.k == 0:
            self.optimizer.step()

    def zero_grad(self):
        if self.micro_batches % self.k == 0:  # only right after a real step
            self.optimizer.zero_grad()


def pass_through(optimizer, k):
    return optimizer  # steps and zeroes on every micro-batch


SOLUTIONS = {"02.1": 1.4, "02.2": accumulate, "02.3": EveryKth}
WRONG = {"02.1": 1.2, "02.2": accumulate_mean, "02.3": pass_through}
