"""Fresh draws for checkers whose inputs must not be known before an answer runs.

A checker that always ran on the same inputs could be answered by typing in the numbers it
compares with. These draws come from the operating system's entropy rather than from Python's,
NumPy's or torch's global seed, which the answer itself may have set.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence


def fresh_rng() -> random.Random:
    """A generator no seed set in the learner's process can predict."""
    return random.Random(int.from_bytes(os.urandom(8), "little"))


def pool_seed(pool: Sequence[int]) -> int:
    """One seed of `pool`, drawn afresh. A pool lists the seeds on which every right and wrong
    answer of the exercise's corpus was tested to get its verdict and hint (on other seeds, sums
    in low precision can round too close to tell two mistakes apart)."""
    return fresh_rng().choice(tuple(pool))
