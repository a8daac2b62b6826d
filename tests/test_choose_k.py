"""Lesson 05: choosing the micro-batch size for a budget; budgets below the floor; OOM probing."""

import pytest
import torch

import accumlab as al
from accumlab.memory.choose_k import candidate_sizes, probe


@pytest.fixture(scope="module")
def setup():
    model, data = al.memory.memory_setup(width=16, depth=2, global_batch=48)
    return (
        model,
        data,
        al.memory.floor_bytes(model, "adam"),
        al.memory.activation_bytes(model, data[:1]),
    )


def test_candidates_are_divisors_largest_first():
    assert candidate_sizes(12) == [12, 6, 4, 3, 2, 1]
    with pytest.raises(ValueError, match="global_batch"):
        candidate_sizes(0)


def test_estimate_picks_largest_divisor_that_fits(setup):
    model, data, floor, per_sample = setup
    choice = al.memory.choose_micro_batch(model, data, floor + 20 * per_sample)
    assert (choice.micro_batch_size, choice.accumulation_steps) == (16, 3)  # 24 > 20 ≥ 16
    assert choice.method == "estimate" and choice.floor_bytes == floor
    assert choice.tried == [(48, False), (24, False), (16, True)]
    assert al.memory.choose_micro_batch(model, data, floor + 48 * per_sample).micro_batch_size == 48
    small = al.memory.choose_micro_batch(model, data, floor + 20 * per_sample, global_batch=12)
    assert (small.micro_batch_size, small.accumulation_steps) == (12, 1)


def test_budget_below_floor_says_by_how_much(setup):
    model, data, floor, _ = setup
    with pytest.raises(
        ValueError,
        match=f"budget_bytes={floor - 1234:,} is 1,234 bytes below the floor of {floor:,}",
    ):
        al.memory.choose_micro_batch(model, data, floor - 1234)


def test_budget_above_floor_but_too_small_for_one_sample(setup):
    model, data, floor, per_sample = setup
    with pytest.raises(ValueError, match=f"{per_sample - 10:,} bytes short"):
        al.memory.choose_micro_batch(model, data, floor + 10)


def test_bad_arguments(setup):
    model, data, floor, _ = setup
    with pytest.raises(ValueError, match="budget_bytes"):
        al.memory.choose_micro_batch(model, data, -5)
    with pytest.raises(ValueError, match="method"):
        al.memory.choose_micro_batch(model, data, floor * 2, method="guess")
    with pytest.raises(ValueError, match="global_batch"):
        al.memory.choose_micro_batch(model, data, floor * 2, global_batch=49)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
def test_probe_needs_a_gpu(setup):
    model, data, floor, _ = setup
    with pytest.raises(ValueError, match="CUDA"):
        al.memory.choose_micro_batch(model, data, floor * 2, method="probe")


def test_probe_catches_oom_frees_and_continues():
    freed = []

    def attempt(m):
        if m > 5:
            raise torch.OutOfMemoryError(f"fake: {m} does not fit")

    size, tried = probe([12, 6, 4, 3], attempt, on_oom=lambda: freed.append(True))
    assert size == 4 and tried == [(12, False), (6, False), (4, True)]
    assert len(freed) == 2


def test_probe_all_fail_and_other_errors_propagate():
    def never(m):
        raise torch.OutOfMemoryError("fake")

    assert probe([2, 1], never, on_oom=lambda: None) == (None, [(2, False), (1, False)])

    def broken(m):
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        probe([2, 1], broken, on_oom=lambda: None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_probe_on_gpu_matches_budget_and_restores_model():
    model, data = al.memory.memory_setup(width=512, depth=4, global_batch=1024, device="cuda")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    floor = al.memory.floor_bytes(model, "adam")
    choice = al.memory.choose_micro_batch(model, data, floor + 64 * 2**20, method="probe")
    assert choice.method == "probe" and choice.micro_batch_size * choice.accumulation_steps == 1024
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    with pytest.raises(ValueError, match="below the floor"):
        al.memory.choose_micro_batch(model, data, floor // 2, method="probe")
