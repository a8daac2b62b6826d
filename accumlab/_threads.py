"""Run tiny models on one CPU thread (lessons 04, 08)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def one_thread() -> Iterator[None]:
    """Inside the block (or decorated function) torch uses one CPU thread; the previous setting is
    restored afterwards. The lessons' models are tiny: handing each op to a second thread costs more
    than the arithmetic, and on a busy 2-core machine waiting for that thread made runs 10-40x slower.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
