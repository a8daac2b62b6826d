"""What each rank runs when tests/test_examples.py checks examples/accumulation_loop.py under DDP:
rank r trains on every other sequence, one epoch, plain SGD, counting DDP's gradient all-reduces."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

import accumlab as al
from accumlab.dist.comm import CommCounter, count_allreduce

LOOP = Path(__file__).resolve().parents[1] / "examples" / "accumulation_loop.py"
SEQUENCES, MICRO, K, LR = 20, 2, 3, 0.5  # per rank: 5 micro-batches, windows of 3 and 2


def load_loop():
    """The example file as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("accumulation_loop", LOOP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def texts() -> al.Data:
    return al.token_data(n=SEQUENCES, min_len=1, max_len=16, vocab=16, seed=3)


def ddp_epoch(ctx) -> dict:
    """One epoch as the loop is written, and one with `no_sync` hidden from it (the mutant)."""
    loop = load_loop()
    mine = al.scaling.unpadded(texts())[ctx.rank :: ctx.world_size]  # every other sequence
    loader = torch.utils.data.DataLoader(mine, batch_size=MICRO, collate_fn=loop.pad_batch)
    out = {}
    for variant in ("no_sync", "hidden"):
        model = torch.nn.parallel.DistributedDataParallel(al.TinyLM(vocab=16, dim=8, seed=0))
        counter = CommCounter()
        count_allreduce(model, counter)
        if variant == "hidden":  # without no_sync DDP all-reduces after every backward
            model = _WithoutNoSync(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        losses = loop.train_epoch(model, optimizer, loader, K)
        params = {n.split("module.")[-1]: p.detach().clone() for n, p in model.named_parameters()}
        out[variant] = {"params": params, "allreduces": counter.calls, "losses": losses}
    return out


class _WithoutNoSync(torch.nn.Module):
    """A DDP model seen through a wrapper that hides `no_sync` (as if the loop never used it)."""

    def __init__(self, ddp):
        super().__init__()
        self.module = ddp

    def forward(self, x):
        return self.module(x)
