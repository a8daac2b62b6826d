"""The sizes of lesson 07's experiments, and the single-process references they are checked
against: the same samples, one process, no communication (lesson 07)."""

from __future__ import annotations

import torch.nn.functional as F

from ..data import regression_data
from ..models import TinyLM, mlp
from ..reference import full_batch_grads
from .ddp import BranchNet, uses_extra
from .shards import global_micro_step
from .tokens import token_batch

# the small models of each part; the worker and the reference must build the same ones
DDP_MODEL = {"features": 4, "hidden": 16}
PITFALL = {"k": 3, "micro_batch": 4, "features": 4, "hidden": 8, "lr": 0.5}
TOKENS = {"k": 2, "micro_batch": 2, "vocab": 16, "dim": 8}
FSDP_MODEL = {"features": 16, "hidden": 64, "depth": 2}
UNEVEN = {"k": 2, "micro_batch": 4, "features": 4, "hidden": 8, "wait": 1.0}
SWEEP = {"ks": (1, 2, 4, 8), "micro_batches": (8, 32), "repeats": 3}


def ddp_reference(world_size: int, k: int, micro_batch: int, seed: int = 0) -> dict:
    """Gradient of the mean loss over the global batch (ranks × micro-batch × k samples)."""
    f, h = DDP_MODEL["features"], DDP_MODEL["hidden"]
    data = regression_data(n=world_size * k * micro_batch, features=f, seed=seed)
    return full_batch_grads(mlp(f, h, seed=seed), data)


def fsdp_reference(world_size: int, k: int, micro_batch: int, seed: int = 0) -> dict:
    m = FSDP_MODEL
    data = regression_data(n=world_size * k * micro_batch, features=m["features"], seed=seed)
    return full_batch_grads(mlp(m["features"], m["hidden"], depth=m["depth"], seed=seed), data)


def token_reference(
    world_size: int, k: int, micro_batch: int, vocab: int, dim: int, seed: int = 0
) -> dict:
    """Every real token of every rank weighs the same: sum of token losses / all tokens."""
    data = token_batch(world_size, k, micro_batch, vocab=vocab, seed=seed)
    return full_batch_grads(TinyLM(vocab, dim, seed=seed), data, loss="cross_entropy")


def branch_reference(
    world_size: int, k: int, micro_batch: int, features: int, hidden: int, seed: int = 0
) -> dict:
    """One process replaying the pitfall's window: micro-step i of all ranks at once, the branch
    used exactly when the ranks used it, each micro-step weighing 1/k."""
    from ..engine import grads_of

    data = regression_data(n=world_size * k * micro_batch, features=features, seed=seed)
    model = BranchNet(features, hidden, seed=seed)
    for i in range(k):
        mb = global_micro_step(data, world_size, i, micro_batch)
        (F.mse_loss(model(mb.x, uses_extra(i)), mb.y) / k).backward()
    return grads_of(model)
