"""11.2's doubled-count probe: an answer must not be able to tell it from the Trainer's call."""

import random

import accumlab as al
from accumlab.exercises import lesson11
from solutions.lesson11 import token_loss


def test_11_2_probe_runs_with_grad_enabled_and_in_either_order(monkeypatch):
    monkeypatch.setattr(lesson11, "_order", lambda: random.Random(0))  # a fixed order to read
    seen = []

    def watching(outputs, labels, num_items_in_batch=None):
        import torch

        seen.append((torch.is_grad_enabled(), num_items_in_batch))
        return token_loss(outputs, labels, num_items_in_batch=num_items_in_batch)

    assert al.check("11.2", watching).ok
    assert seen and all(grad for grad, _ in seen)  # a no_grad probe is one an answer can spot
    counts = [float(n) for _, n in seen if n is not None]
    # the Trainer's calls come in pairs (count, 2 × count) or (2 × count, count): which is first
    firsts, i = set(), 0
    while i + 1 < len(counts):
        a, b = counts[i], counts[i + 1]
        if 2 * a == b or a == 2 * b:
            firsts.add(a < b)
            i += 2
        else:
            i += 1
    assert firsts == {True, False}, "the probe should come both before and after the real call"
