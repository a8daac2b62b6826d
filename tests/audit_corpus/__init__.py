"""A regression corpus for al.audit: real gradient-accumulation loops from public code.

Each entry is a loop taken from a well-known training script, framework documentation or issue
thread (its source is cited above the function), adapted minimally to the audit's interface
`train_fn(model, optimizer, batches, k, **extras)`: the data loader becomes `batches`, the
accumulation steps become `k`, the optimizer / scheduler / GradScaler come from the audit, and
autocast and device moves are dropped (the audit runs float64 on the CPU). The verdict an expert
gives after reading the code is written in `expected`, before the audit ever ran on it.
"""

from .entries import CORPUS, CorpusLoop

__all__ = ["CORPUS", "CorpusLoop"]
