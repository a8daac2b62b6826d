"""Which parts of Accelerate an answer used: exercise 02.3 asks the learner to write what
Accelerate's optimizer wrapper and micro-batch counter do, so using them is not an answer."""

from __future__ import annotations

from ._observe import Spy


class AccelerateCounter:
    """While the block runs, counts the calls to the parts of Accelerate that do 02.3's work:
    the optimizer wrapper, and the micro-batch counter behind `sync_gradients`. `used` names
    the first one called, or is empty."""

    def __init__(self):
        self.spies: list[Spy] = []

    def __enter__(self):
        try:
            from accelerate.accelerator import Accelerator
            from accelerate.optimizer import AcceleratedOptimizer
            from accelerate.state import GradientState
        except ImportError:  # no Accelerate: nothing of it can be used
            return self
        self.spies = [
            Spy(AcceleratedOptimizer, "__init__", "accelerate's AcceleratedOptimizer"),
            # a subclass that skips __init__ still steps through these
            Spy(AcceleratedOptimizer, "step", "accelerate's AcceleratedOptimizer.step"),
            Spy(AcceleratedOptimizer, "zero_grad", "accelerate's AcceleratedOptimizer.zero_grad"),
            Spy(Accelerator, "_do_sync", "Accelerator._do_sync()"),
            Spy(GradientState, "_set_sync_gradients", "accelerate's GradientState"),
        ]
        for spy in self.spies:
            spy.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for spy in reversed(self.spies):
            spy.__exit__(*exc)

    @property
    def used(self) -> str:
        return next((spy.label for spy in self.spies if spy.calls), "")
