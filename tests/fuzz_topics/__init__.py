"""Bad-input cases of the topic folders, one module per topic (`CASES` in each), run by
tests/test_fuzz_topics.py in one worker (see tests/fuzz_harness.py for the verdicts)."""

from __future__ import annotations

import torch

import accumlab as al

NAN, INF = float("nan"), float("inf")


def data(n=8, features=4, **kw):
    return al.regression_data(n, features, **kw)


def spin(*args, **kwargs):
    """A learner's loop that never ends."""
    while True:
        pass


def is_finite_number(value) -> bool:
    return isinstance(value, float) and value == value and abs(value) != float("inf")


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)
