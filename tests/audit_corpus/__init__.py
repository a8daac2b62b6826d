"""A regression corpus for al.audit: real gradient-accumulation loops from public code.

Each entry is a loop taken from a well-known training script, framework documentation or issue
thread (its source is cited above the function), adapted minimally to the audit's interface
`train_fn(model, optimizer, batches, k, **extras)`, called once per epoch (the audit runs two):
the data loader becomes `batches`, the accumulation steps become `k`, the optimizer / scheduler /
GradScaler come from the audit, state the original keeps across epochs lives on an object (the
loop is a class), and autocast and device moves are dropped (the audit runs float64 on the CPU).
The verdict an expert gives after reading the code is written in `expected`, with the reasoning
in `why`; the audit must give exactly that verdict.
"""

from .entries import CORPUS, CorpusLoop

__all__ = ["CORPUS", "CorpusLoop"]
