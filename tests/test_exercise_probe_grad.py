"""11.2's doubled-count probe: an answer must not be able to tell it from the Trainer's call."""

import importlib.util
import random
from pathlib import Path

import accumlab as al
from accumlab.exercises import lesson11


def _token_loss():
    path = Path(__file__).resolve().parents[1] / "solutions" / "lesson11.py"
    spec = importlib.util.spec_from_file_location("solutions_lesson11_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.token_loss


def test_11_2_probe_runs_with_grad_enabled_and_in_either_order(monkeypatch):
    monkeypatch.setattr(lesson11, "_order", lambda: random.Random(0))  # a fixed order to read
    seen, token_loss = [], _token_loss()

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
