"""Every bad input gets a ValueError that names the parameter and the value."""

import numpy as np
import pytest
import torch

import accumlab as al
from accumlab import _validate


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"micro_batch_size": 0}, "micro_batch_size.*0"),
        ({"micro_batch_size": -3}, "micro_batch_size.*-3"),
        ({"micro_batch_size": 2.5}, "micro_batch_size.*2.5"),
        ({"micro_batch_size": True}, "micro_batch_size.*True"),
        ({"micro_batch_size": 2, "accumulation_steps": 0}, "accumulation_steps.*0"),
        ({"micro_batch_size": 2, "normalization": "avg"}, "normalization.*'avg'"),
        ({"micro_batch_size": 2, "last_window": "pad"}, "last_window.*'pad'"),
        ({"micro_batch_size": 2, "zero_grad": "never"}, "zero_grad.*'never'"),
    ],
)
def test_recipe_rejects(kwargs, match):
    with pytest.raises(ValueError, match=match):
        al.Recipe(**kwargs)


def test_micro_batch_larger_than_batch():
    with pytest.raises(ValueError, match="micro_batch_size.*at most.*8.*got 9"):
        al.run(al.Recipe(9), al.mlp(4), al.regression_data(8))
    with pytest.raises(ValueError, match="micro_batch_size"):
        al.accumulated_grads(al.mlp(4), al.regression_data(8), 9)


def test_mismatched_lengths():
    with pytest.raises(ValueError, match=r"len\(x\)=3, len\(y\)=2"):
        al.Data(torch.zeros(3, 1), torch.zeros(2, 1))


def test_accumulated_grads_needs_one_window():
    with pytest.raises(ValueError, match="accumulation_steps=2"):
        al.accumulated_grads(al.mlp(4), al.regression_data(8), 2, 2)


def test_unknown_loss_and_optimizer():
    with pytest.raises(ValueError, match="loss.*'l1'"):
        al.full_batch_grads(al.mlp(4), al.regression_data(8), loss="l1")
    with pytest.raises(ValueError, match="optimizer.*'lbfgs'"):
        al.run(al.Recipe(4), al.mlp(4), al.regression_data(8), optimizer="lbfgs")


def test_generators_reject_bad_sizes():
    with pytest.raises(ValueError, match="n must be.*0"):
        al.regression_data(0)
    with pytest.raises(ValueError, match="lengths\\[1\\].*-2"):
        al.token_data(lengths=[3, -2])
    with pytest.raises(ValueError, match="min_len.*max_len"):
        al.token_data(4, min_len=5, max_len=3)
    with pytest.raises(ValueError, match="norm.*'batchnorm'"):
        al.mlp(4, norm="batchnorm")
    with pytest.raises(ValueError, match="seed.*-1"):
        al.setup(seed=-1)


def test_global_normalization_with_no_real_tokens():
    data = al.token_data(lengths=[0, 0])
    with pytest.raises(ValueError, match="zero real items"):
        al.run(al.Recipe(1, 2, normalization="global"), al.TinyLM(), data, loss="cross_entropy")
    with pytest.raises(ValueError, match="zero real items"):
        al.full_batch_grads(al.TinyLM(), data, loss="cross_entropy")


def test_grad_diff_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="same parameters"):
        al.grad_diff({"a": torch.ones(2)}, {"b": torch.ones(2)})
    with pytest.raises(ValueError, match="same sizes"):
        al.grad_diff({"a": torch.ones(2)}, {"a": torch.ones(3)})


def test_empty_micro_batch_under_mean_normalization():
    data = al.token_data(lengths=[3, 0, 4, 2])
    with pytest.raises(ValueError, match="micro-batch 1 of window 0 holds zero real items"):
        al.run(al.Recipe(1, 4), al.TinyLM(), data, loss="cross_entropy")


def test_batchnorm_with_single_sample_micro_batches():
    model = al.mlp(4, 8, 1, norm="batch")
    with pytest.raises(ValueError, match="BatchNorm in training mode needs at least 2"):
        al.run(al.Recipe(1, 4), model, al.regression_data(8))
    with pytest.raises(ValueError, match="BatchNorm"):
        al.accumulated_grads(model, al.regression_data(9), 2)  # last micro-batch holds 1 sample


def test_first_window_is_one_optimizer_step_of_samples():
    data = al.regression_data(10)
    assert len(data.first_window(3, 3)) == 9
    with pytest.raises(ValueError, match="= 12 exceeds the 10 samples"):
        data.first_window(4, 3)
    with pytest.raises(ValueError, match="accumulation_steps.*0"):
        data.first_window(4, 0)


# --- the one number rule (accumlab/_validate.py): what counts as an integer, a number, a seed ----

_INTEGERS = [
    3,
    np.int64(3),
    np.uint8(3),
    np.array(3),
    torch.tensor(3),
    torch.tensor(3, dtype=torch.int8),
]
_NOT_INTEGERS = [True, np.bool_(True), torch.tensor(True), 3.0, np.float64(3.0), torch.tensor(3.0),
                 torch.tensor([3]), np.array([3]), [3], "3", None]  # fmt: skip


@pytest.mark.parametrize("value", _INTEGERS, ids=repr)
def test_integers_of_every_type_come_back_as_python_ints(value):
    for check in (
        lambda v: _validate.positive_int("n", v),
        lambda v: _validate.seed("seed", v),
        lambda v: al.scaling.effective_batch_size(v, 1),
    ):
        got = check(value)
        assert type(got) is int and got == 3


@pytest.mark.parametrize("value", _NOT_INTEGERS, ids=repr)
def test_everything_else_is_refused_as_an_integer_naming_it(value):
    with pytest.raises(ValueError, match=r"n must be an integer >= 1, got "):
        _validate.positive_int("n", value)
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*32\)"):
        _validate.seed("seed", value)


@pytest.mark.parametrize(
    "value", [0.5, np.float32(0.5), np.float64(0.5), torch.tensor(0.5)], ids=repr
)
def test_real_numbers_of_every_type_come_back_as_python_floats(value):
    for check in (_validate.positive_float, _validate.finite_float, _validate.fraction):
        got = check("x", value)
        assert type(got) is float and got == 0.5


@pytest.mark.parametrize("value", [True, torch.tensor(True), torch.tensor([0.5]), "0.5"], ids=repr)
def test_bools_and_arrays_are_not_real_numbers(value):
    for check in (_validate.positive_float, _validate.finite_float, _validate.fraction):
        with pytest.raises(ValueError, match="x must be"):
            check("x", value)


def test_frozen_setups_store_python_numbers():
    """Setup and Problem keep what they validated: a numpy seed stored as is would reach
    torch.manual_seed, which refuses it."""
    setup = al.bookkeeping.Setup(
        seed=np.int64(2), accumulation_steps=torch.tensor(2), lr=np.float32(0.5)
    )
    assert (type(setup.seed), type(setup.accumulation_steps), type(setup.lr)) == (int, int, float)
    assert setup == al.bookkeeping.Setup(seed=2, accumulation_steps=2, lr=0.5)
    problem = al.scale.Problem(np.int64(4), torch.tensor(0.5))
    assert (type(problem.features), type(problem.noise)) == (int, float)


def test_finite_tensors_reads_numbers_inside_state_dicts():
    state = {
        "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999)}],
        "state": {0: {"step": torch.tensor(1.0)}},
    }
    assert _validate.finite_tensors("optimizer", state) is state
    state["param_groups"][0]["lr"] = float("nan")
    with pytest.raises(ValueError, match=r"optimizer\['param_groups'\]\[0\]\['lr'\] is nan"):
        _validate.finite_tensors("optimizer", state)
