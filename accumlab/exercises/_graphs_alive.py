"""The saved tensors an answer's forwards keep alive, counted per forward (`Observe` reads
`peak_graphs` from it): how many micro-batches' graphs backward has not freed yet."""

from __future__ import annotations

import weakref

from ..saved import LiveSavedTensors
from ._model_effects import _graph_task


class _GraphsAlive(LiveSavedTensors):
    """LiveSavedTensors that also tags each saved tensor with the forward that saved it (the
    forward running, or the last one: a loss computed after it belongs to its graph), so it can
    count the forwards whose saved tensors are still alive: graphs backward has not freed."""

    def __init__(self, exclude, current, inside=lambda: True):
        super().__init__(exclude)
        self._current, self._inside = current, inside
        self._per_forward: dict[int, int] = {}
        self.graphs = 0
        self.peak_graphs = 0
        self.together: list[frozenset[int]] = []  # the forwards alive whenever two or more were

    def _pack(self, t):
        if _graph_task() != -1:  # saved by a forward rerun inside backward (checkpointing)
            return t
        if not self._inside() and t.grad_fn is None and not t.requires_grad:
            # data saved outside the model (the input torch.utils.checkpoint keeps before it
            # calls the model, a loss's targets): no micro-batch's graph of its own
            return t
        held = super()._pack(t)
        if held is not t:  # tracked (not one of the excluded parameters)
            index = self._current()
            if index not in self._per_forward:
                self._per_forward[index] = 0
                self.graphs += 1
                self.peak_graphs = max(self.peak_graphs, self.graphs)
                if self.graphs > 1:
                    self.together.append(frozenset(self._per_forward))
            self._per_forward[index] += 1
            weakref.finalize(held, self._drop, index)
        return held

    def _drop(self, index: int) -> None:
        self._per_forward[index] -= 1
        if self._per_forward[index] == 0:
            del self._per_forward[index]
            self.graphs -= 1
