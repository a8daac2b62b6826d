"""Lesson 11: Accelerate's process-wide state, the lesson's own for each run and put back after.

`Accelerator(cpu=True)` fills Accelerate's `PartialState` and `AcceleratorState`, singletons shared
by every Accelerator of the process (accelerate/state.py). Left filled, a GPU `Accelerator()` made
later in the same kernel would find `cpu=True` and stay on the CPU; filled by a GPU Accelerator
made earlier, every `Accelerator(cpu=True)` of the lesson raises "AcceleratorState has already
been initialized". So each run starts from empty states and, when it ends, the states are put back
as they were before it (empty, where nothing had made them). `GradientState` is left alone: the
lesson shows what a second Accelerator inherits from it (`fresh_accelerator` resets what it must).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager


def _states() -> tuple:
    """Accelerate's two device singletons, where accelerate has been imported (else none)."""
    state = sys.modules.get("accelerate.state")
    return () if state is None else (state.PartialState, state.AcceleratorState)


@contextmanager
def own_accelerate_state():
    """Inside: empty PartialState / AcceleratorState; after: what they held before."""
    saved = {cls: dict(cls._shared_state) for cls in _states()}
    for cls in saved:
        cls._shared_state.clear()
    try:
        yield
    finally:
        for cls in _states():  # accelerate may have been imported by the run itself
            cls._shared_state.clear()
            cls._shared_state.update(saved.get(cls, {}))


def accelerate_state_is_empty() -> bool:
    """True when no Accelerator's device state is left in this process (lesson 11 checks it)."""
    return all(not cls._shared_state for cls in _states())
