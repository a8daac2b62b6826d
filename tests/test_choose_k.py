"""Lesson 05: choosing the micro-batch size for a budget — by estimate (named tensors) and by
probe (real steps, measured; out-of-memory emulated on the CPU, real on a GPU)."""

import pytest
import torch

import accumlab as al
from accumlab.memory.choose_k import candidate_sizes, probe


@pytest.fixture(scope="module")
def setup():
    model, data = al.memory.memory_setup(width=16, depth=2, global_batch=48)
    return model, data, al.memory.floor_bytes(model, "adam")


def test_candidates_are_divisors_largest_first():
    assert candidate_sizes(12) == [12, 6, 4, 3, 2, 1]
    with pytest.raises(ValueError, match="global_batch"):
        candidate_sizes(0)


def test_floor_counts_the_step_temporaries_not_the_data(setup):
    model, data, floor = setup
    parts = al.memory.footprint(model, data, 48, measure=False)
    # the data stays in host memory: only a micro-batch at a time is on the device, and not
    # during optimizer.step()
    assert floor == parts.params + parts.grads + parts.optimizer_state + parts.step_transient
    # foreach Adam's sqrt(exp_avg_sq): about one more copy of the parameters (the old floor missed it)
    assert parts.step_transient > 0.99 * parts.params


def test_estimate_picks_the_largest_divisor_whose_estimate_fits(setup):
    model, data, floor = setup
    for extra in (0, 2_000, 6_000, 20_000):
        choice = al.memory.choose_micro_batch(model, data, floor + extra, method="estimate")
        m = choice.micro_batch_size
        assert choice.method == "estimate" and m * choice.accumulation_steps == 48
        assert choice.tried[-1] == (m, True) and all(not ok for _, ok in choice.tried[:-1])
        assert choice.needed[-1] <= floor + extra < min(choice.needed[:-1], default=float("inf"))
    assert (
        al.memory.choose_micro_batch(model, data, 10 * floor, method="estimate").micro_batch_size
        == 48
    )


def test_budget_below_floor_says_by_how_much(setup):
    model, data, floor = setup
    for method in ("estimate", "probe"):
        with pytest.raises(
            ValueError,
            match=f"budget_bytes={floor - 1234:,} is 1,234 bytes below the floor of {floor:,}",
        ):
            al.memory.choose_micro_batch(model, data, floor - 1234, method=method)


def test_probe_runs_real_steps_on_the_cpu_and_restores_the_model(setup):
    model, data, floor = setup
    before = {k: v.clone() for k, v in model.state_dict().items()}
    choice = al.memory.choose_micro_batch(model, data, floor + 8_000, method="probe")
    assert choice.method == "probe" and choice.micro_batch_size * choice.accumulation_steps == 48
    # every size tried was measured on the CPU: the ones refused needed more than the budget
    for (m, fitted), needed in zip(choice.tried, choice.needed, strict=True):
        assert (needed <= choice.budget_bytes) == fitted, m
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


def test_the_estimate_can_pick_a_size_whose_real_step_does_not_fit():
    # the prediction behind the probe: the estimate cannot see backward's temporaries
    model, data = al.memory.memory_setup(width=32, depth=2, global_batch=256)
    # a budget exactly what the estimate says micro-batches of 64 need
    budget = al.memory.footprint(model, data, 64, optimizer="adamw", measure=False).estimate
    estimate = al.memory.choose_micro_batch(
        model, data, budget, optimizer="adamw", method="estimate"
    )
    assert estimate.micro_batch_size == 64
    probed = al.memory.choose_micro_batch(model, data, budget, optimizer="adamw", method="probe")
    assert probed.micro_batch_size < estimate.micro_batch_size
    measured = dict(zip((m for m, _ in probed.tried), probed.needed, strict=True))
    assert measured[estimate.micro_batch_size] > budget  # what the estimate picked did not fit
    assert al.memory.choose_micro_batch(model, data, budget, optimizer="adamw").method == "probe"


def test_bad_arguments(setup):
    model, data, floor = setup
    with pytest.raises(ValueError, match="budget_bytes"):
        al.memory.choose_micro_batch(model, data, -5)
    with pytest.raises(ValueError, match="method"):
        al.memory.choose_micro_batch(model, data, floor * 2, method="guess")
    with pytest.raises(ValueError, match="global_batch"):
        al.memory.choose_micro_batch(model, data, floor * 2, global_batch=49)
    with pytest.raises(ValueError, match="exceeds the"):
        al.memory.choose_micro_batch(model, data, 2**62, method="probe")


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


def test_the_probe_warms_up_the_multi_row_matmul_workspace_before_measuring():
    # a cuBLASLt-like workspace (modelled by the simulated GPU) appears at the first addmm of more
    # than one row: a one-row warm-up would leave it inside the first candidate's measurement, so
    # the same probe would measure more the first time it runs in a process than the second
    from cuda_layer import SimulatedGpu

    with SimulatedGpu(blaslt_workspace=2**20) as gpu:
        model, data = al.memory.memory_setup(width=32, depth=2, global_batch=64, device="cuda")
        budget = al.memory.floor_bytes(model, "adam") + 20_000
        first = al.memory.choose_micro_batch(model, data, budget, method="probe")
        assert gpu.tracker.workspace is not None  # the warm-up created it
        second = al.memory.choose_micro_batch(model, data, budget, method="probe")
    assert first.needed == second.needed and first.tried == second.tried


def test_the_probe_warms_up_the_forward_and_the_backward_workspaces_before_measuring():
    # cuBLAS keeps one workspace per (thread, stream) and backward runs on a thread of its own
    # (modelled by FirstMatmulWorkspace): a warm-up without its backward would leave the backward's
    # workspace inside the first candidate's measurement, so the first probe in a process would
    # measure more than the second
    from cuda_layer import SimulatedGpu
    from cuda_layer.workspaces import FirstMatmulWorkspace

    gpu = SimulatedGpu()
    with FirstMatmulWorkspace(gpu, 2**20) as workspaces, gpu:
        model, data = al.memory.memory_setup(width=32, depth=2, global_batch=64, device="cuda")
        budget = al.memory.floor_bytes(model, "adam") + 20_000
        first = al.memory.choose_micro_batch(model, data, budget, method="probe")
        assert len(workspaces.blocks) == 2  # the forward's and the backward's
        second = al.memory.choose_micro_batch(model, data, budget, method="probe")
    assert first.needed == second.needed and first.tried == second.tried


def test_the_probe_refuses_a_budget_the_device_has_no_room_for():
    # the CUDA context (and other processes) hold memory the allocator does not count
    from cuda_layer import SimulatedGpu

    total, context = 2**30, 2**29
    with SimulatedGpu(total_memory=total, context_bytes=context):
        model, data = al.memory.memory_setup(width=16, depth=2, global_batch=16, device="cuda")
        with pytest.raises(ValueError, match="torch.cuda.mem_get_info"):
            al.memory.choose_micro_batch(model, data, total - context // 2, method="probe")
