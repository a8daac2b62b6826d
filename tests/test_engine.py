"""The engine: accumulated gradients equal full-batch gradients exactly when they should."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import accumlab as al


def test_classic_example_reproduced_exactly():
    data, model = al.classic_data(), al.ScalarModel(w=1.0)
    assert float(al.full_batch_grads(model, data)["w"]) == -20.0
    trace = al.run(
        al.Recipe(micro_batch_size=1, accumulation_steps=2), model, data, lr=0.01, record_grads=True
    )
    assert [float(g["w"]) for g in trace.grads] == [-16.0, -20.0]
    assert math.isclose(float(trace.params[-1]["w"]), 1.2, rel_tol=1e-15)
    assert model.w.item() == 1.0  # run works on a copy


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 40),
    features=st.integers(1, 5),
    outputs=st.integers(1, 3),
    micro=st.integers(1, 40),
    seed=st.integers(0, 10_000),
)
def test_accumulated_equals_full_batch_float64(n, features, outputs, micro, seed):
    data = al.regression_data(n, features, outputs, seed=seed)
    model = al.mlp(features, 5, outputs, depth=1, seed=seed)
    micro = min(micro, n)
    # "global" normalisation weighs every item 1/N, so it is exact even with a short last micro-batch
    diff = al.grad_diff(
        al.accumulated_grads(model, data, micro, normalization="global"),
        al.full_batch_grads(model, data),
    )
    assert diff.max_rel <= 1e-12
    if n % micro == 0:  # equal micro-batches: the usual loss / k is exact too
        diff = al.grad_diff(
            al.accumulated_grads(model, data, micro), al.full_batch_grads(model, data)
        )
        assert diff.max_rel <= 1e-12


@settings(max_examples=15, deadline=None)
@given(k=st.integers(2, 6), micro=st.integers(1, 5), seed=st.integers(0, 1000))
def test_undivided_loss_gives_k_times_the_gradient(k, micro, seed):
    data = al.regression_data(micro * k, 3, seed=seed)
    model = al.mlp(3, 4, 1, depth=1, seed=seed)
    full = al.full_batch_grads(model, data)
    wrong = al.accumulated_grads(model, data, micro, normalization="none")
    assert al.grad_diff(wrong, {n: k * g for n, g in full.items()}).max_rel <= 1e-12


def test_zero_grad_every_micro_step_keeps_only_last_micro_batch():
    data = al.regression_data(12, 2, seed=1)
    model = al.mlp(2, 3, 1, depth=1, seed=1)
    wrong = al.accumulated_grads(model, data, 4, zero_grad="every_micro_step")
    last = al.full_batch_grads(model, data[8:12])
    assert al.grad_diff(wrong, {n: g / 3 for n, g in last.items()}).max_rel <= 1e-12


def test_sum_normalization_matches_summed_loss():
    data = al.regression_data(10, 2, seed=2)
    model = al.mlp(2, 3, 1, depth=1, seed=2)
    full = al.full_batch_grads(model, data)
    summed = al.accumulated_grads(model, data, 3, normalization="sum")
    assert al.grad_diff(summed, {n: len(data) * g for n, g in full.items()}).max_rel <= 1e-12


def test_trace_events_and_steps():
    data = al.regression_data(20, 2)
    trace = al.run(al.Recipe(2, 3), al.mlp(2, 3, 1, depth=1), data, epochs=2, record_grads=True)
    # 10 micro-batches → windows of 3,3,3,1 per epoch
    assert trace.steps == 8 and trace.count("step") == 8 and trace.count("backward") == 20
    assert len(trace.grads) == 20 and len(trace.params) == 8
    dropped = al.run(al.Recipe(2, 3, last_window="drop"), al.mlp(2, 3, 1, depth=1), data)
    assert dropped.steps == 3 and dropped.count("backward") == 9


def test_window_loss_is_item_weighted_mean():
    data = al.regression_data(9, 2, seed=3)
    model = al.mlp(2, 3, 1, depth=1, seed=3)
    trace = al.run(al.Recipe(4, 3), model, data, optimizer=None)
    loss_sum, count = al.get_loss("mse")(model(data.x), data.y)
    assert math.isclose(trace.window_losses[0], loss_sum.item() / count, rel_tol=1e-12)


def test_optimizer_choices_and_none():
    data = al.regression_data(8, 2)
    model = al.mlp(2, 3, 1, depth=1)
    before = al.params_of(model)
    frozen = al.run(al.Recipe(4, 2), model, data, optimizer=None)
    assert all(torch.equal(frozen.params[-1][n], before[n]) for n in before)
    for opt in ("sgd", "adam", "adamw", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)):
        trace = al.run(al.Recipe(4, 2), model, data, optimizer=opt)
        assert not torch.equal(trace.params[-1]["0.weight"], before["0.weight"])


def test_in_place_changes_the_model():
    data, model = al.classic_data(), al.ScalarModel()
    al.run(al.Recipe(2), model, data, in_place=True)
    assert float(model.w) == pytest.approx(1.2)


def test_token_data_global_normalization_is_exact_mean_of_means_is_not():
    data = al.token_data(8, min_len=1, max_len=20, seed=4)
    model = al.TinyLM(seed=4)
    full = al.full_batch_grads(model, data, loss="cross_entropy")
    good = al.accumulated_grads(model, data, 2, normalization="global", loss="cross_entropy")
    bad = al.accumulated_grads(model, data, 2, normalization="mean", loss="cross_entropy")
    assert al.grad_diff(good, full).max_rel <= 1e-12
    assert al.grad_diff(bad, full).max_rel > 1e-3


def test_grads_are_recorded_only_when_asked():
    data = al.regression_data(8, 2)
    assert al.run(al.Recipe(2, 2), al.mlp(2, 3, 1, depth=1), data).grads == []
    trace = al.run(al.Recipe(2, 2), al.mlp(2, 3, 1, depth=1), data, record_grads=True)
    assert len(trace.grads) == 4 and len(trace.micro_losses) == 4 == len(trace.scaled_losses)
    # each window's last snapshot is what the optimizer stepped with
    assert all(
        torch.equal(trace.grads[i]["0.weight"], trace.window_grads[w]["0.weight"])
        for w, i in ((0, 1), (1, 3))
    )


def test_record_windows_off_keeps_the_result_and_drops_the_copies():
    data = al.regression_data(16, 2, seed=8)
    model = al.mlp(2, 3, 1, depth=1, seed=8)
    full = al.run(al.Recipe(2, 4), model, data, lr=0.1)
    lean = al.run(al.Recipe(2, 4), model, data, lr=0.1, record_windows=False)
    assert lean.window_grads == [] and lean.params == [] and lean.steps == full.steps == 2
    assert lean.window_losses == full.window_losses
    assert al.grad_diff(al.params_of(lean.model), full.params[-1]).max_abs == 0
