"""Lesson 05: the lean training step and the timing helpers (structure only: timings are never asserted)."""

import pytest
import torch

import accumlab as al
from accumlab.memory.step import train_step
from accumlab.optim import make_optimizer


@pytest.fixture(scope="module")
def small():
    return al.memory.memory_setup(width=8, depth=3, global_batch=16)


def test_train_step_matches_the_engine(small):
    model, data = small
    import copy

    mine = copy.deepcopy(model)
    opt = make_optimizer("sgd", mine.parameters(), lr=0.01)
    total = train_step(mine, opt, data.micro_batches(4))
    trace = al.run(al.Recipe(4, 4), model, data, loss="mse", optimizer="sgd", lr=0.01)
    for (name, p), q in zip(mine.named_parameters(), trace.model.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6), name
    assert total.requires_grad is False and total.dim() == 0


def test_make_optimizer_names():
    p = [torch.nn.Parameter(torch.zeros(2))]
    assert isinstance(make_optimizer("sgd_momentum", p), torch.optim.SGD)
    assert isinstance(make_optimizer("adamw", p), torch.optim.AdamW)
    with pytest.raises(ValueError, match="optimizer"):
        make_optimizer("rmsprop", p)


def test_time_step_and_sweep_structure(small):
    model, data = small
    before = [p.clone() for p in model.parameters()]
    s = al.memory.time_step(model, data, 4, repeats=1)
    assert isinstance(s, float) and s > 0
    assert all(
        torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True)
    )  # timed on a copy
    sweep = al.memory.step_time_sweep(model, data, [16, 4], repeats=1, progress=False)
    assert sweep["accumulation_steps"] == [1, 4] and len(sweep["seconds"]) == 2
    with pytest.raises(ValueError, match="repeats"):
        al.memory.time_step(model, data, 4, repeats=0)


def test_checkpoint_comparison_relations(small):
    model, data = small
    cmp = al.memory.checkpoint_comparison(model, data, 4, 2, repeats=1, progress=False)
    rows = {r["name"]: r for r in cmp["rows"]}
    assert list(rows) == ["plain", "checkpointing", "accumulation", "both"]
    assert rows["accumulation"]["activations"] * 4 == rows["plain"]["activations"]
    assert rows["both"]["activations"] < rows["accumulation"]["activations"]
    assert rows["checkpointing"]["activations"] < rows["plain"]["activations"]
    with pytest.raises(ValueError, match="segments"):
        al.memory.checkpoint_comparison(model, data, 4, 1)
