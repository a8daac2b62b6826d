"""Lesson 05: memory parts, saved activations, checkpointing accounting, live saved tensors, leaks."""

import json

import pytest
import torch

import accumlab as al
from accumlab.memory.checkpointing import Checkpointed
from accumlab.memory.parts import grad_bytes, param_bytes, tensor_bytes
from accumlab.saved import LiveSavedTensors, _storage_key, saved_storages


@pytest.fixture(scope="module")
def small():
    return al.memory.memory_setup(width=16, depth=3, global_batch=32)


def test_setup_validates_and_is_deterministic():
    a, da = al.memory.memory_setup(8, 2, 4, seed=3)
    b, db = al.memory.memory_setup(8, 2, 4, seed=3)
    assert torch.equal(da.x, db.x) and all(
        torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True)
    )
    assert next(a.parameters()).dtype == torch.float32
    with pytest.raises(ValueError, match="width"):
        al.memory.memory_setup(width=0)
    with pytest.raises(ValueError, match="depth"):
        al.memory.memory_setup(depth=1.5)


def test_setup_refuses_sizes_the_machine_cannot_hold_before_allocating():
    # 10**6 × 10**6 weights would be terabytes: refused by arithmetic, in microseconds
    with pytest.raises(ValueError, match=r"width=1000000.*more than half of the"):
        al.memory.memory_setup(width=10**6)
    with pytest.raises(ValueError, match="global_batch=1000000000"):
        al.memory.memory_setup(width=64, global_batch=10**9)


def test_param_grad_and_optimizer_state_bytes(small):
    model, _ = small
    n = sum(p.numel() for p in model.parameters())
    tensors = len(list(model.parameters()))
    assert param_bytes(model) == grad_bytes(model) == 4 * n
    assert al.memory.optimizer_state_bytes(model, "sgd") == 0
    assert al.memory.optimizer_state_bytes(model, "sgd_momentum") == 4 * n
    for name in ("adam", "adamw"):
        assert (
            al.memory.optimizer_state_bytes(model, name) == 8 * n + 4 * tensors
        )  # 2 moments + step counters
    with pytest.raises(ValueError, match="optimizer"):
        al.memory.optimizer_state_bytes(model, "lion")
    assert all(p.grad is None for p in model.parameters())  # measured on a copy


def test_tensor_bytes_counts_shared_storage_once():
    t = torch.zeros(10, dtype=torch.float32)
    assert tensor_bytes([t, t[:5], t.view(2, 5)]) == 40


def test_activation_bytes_proportional_and_exclude_inputs(small):
    model, data = small
    sizes = [1, 2, 4, 8, 16, 32]
    acts = [al.memory.activation_bytes(model, data[:m]) for m in sizes]
    assert al.memory.proportional_deviation(sizes, acts) == 0.0
    # per sample: 3 hidden layers + the prediction, 16 float32 each; the batch itself is not counted
    assert acts[0] == 4 * 16 * 4


def test_proportional_deviation_detects_an_offset():
    assert al.memory.proportional_deviation([1, 2, 4], [10, 20, 40]) == 0.0
    assert al.memory.proportional_deviation([1, 2, 4], [15, 25, 45]) == pytest.approx(
        15 / 11.25 - 1
    )
    with pytest.raises(ValueError, match="equal length"):
        al.memory.proportional_deviation([1, 2], [1])


def test_proportional_deviation_with_zeros_and_bad_values():
    # a zero at the largest size used to divide by zero
    assert al.memory.proportional_deviation([1, 2, 4], [0, 0, 0]) == 0.0  # 0 per item: exact
    assert al.memory.proportional_deviation([1, 2, 4], [3, 0, 0]) == float("inf")
    with pytest.raises(ValueError, match="sizes"):
        al.memory.proportional_deviation([0, 2], [1, 2])
    with pytest.raises(ValueError, match="finite"):
        al.memory.proportional_deviation([1, 2], [float("nan"), 2])


def test_footprint_parts_floor_and_estimate(small):
    model, data = small
    f = al.memory.footprint(model, data, 8, optimizer="adam")
    assert f.resting == f.params + f.optimizer_state  # the data stays in host memory
    assert f.floor == f.resting + f.grads + f.step_transient
    # k = 4: gradients exist; one micro-batch's data is on the device with its activations
    assert f.forward_end == f.resting + f.grads + f.data + f.activations
    assert f.estimate == max(f.forward_end, f.floor)
    assert f.data == al.memory.data_bytes(data[:8]) == 2 * 8 * 16 * 4
    assert f.step_transient == pytest.approx(f.params, abs=4 * len(list(model.parameters())))
    assert list(f.parts()) == [
        "parameters",
        "optimizer state",
        "gradients",
        "optimizer-step temporaries",
        "micro-batch data",
        "saved activations",
    ]
    # measured on the CPU too, and never below the tensors that must be alive at one moment
    assert f.peak >= f.estimate
    one = al.memory.footprint(model, data, 32)
    assert one.forward_end == one.resting + one.data + one.activations  # k = 1: no gradient yet
    assert one.data == al.memory.data_bytes(data)
    with pytest.raises(ValueError, match="micro_batch_size"):
        al.memory.footprint(model, data, 0)
    with pytest.raises(ValueError, match="micro_batch_size"):
        al.memory.footprint(model, data, 33)


def test_step_peak_is_measured_on_a_copy(small):
    model, data = small
    before = [p.clone() for p in model.parameters()]
    above = al.memory.step_peak_bytes(model, data, 8)
    assert above >= al.memory.grad_bytes(model)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert all(p.grad is None for p in model.parameters())


def test_the_mse_loss_holds_one_float_per_output_element_until_it_is_freed(small):
    model, data = small
    kept = al.memory.loss_storage(model, data[:8])
    # F.mse_loss reduces inside a full-size output: the 0-d loss keeps that storage, and so does
    # every .detach() of it; a clone holds the one number
    assert kept["loss"] == kept["output"] == 8 * 16 * 4 and kept["detached"] == kept["loss"]
    assert kept["clone"] == 4
    # the step's peak without that buffer (compact_loss) is lower, and never below the estimate
    estimate = al.memory.footprint(model, data, 8, measure=False)
    plain = al.memory.step_peak_bytes(model, data, 8)
    compact = al.memory.step_peak_bytes(model, data, 8, compact_loss=True)
    assert plain > compact and estimate.resting + compact >= estimate.estimate


def test_the_loss_temporary_comes_from_the_profiler_not_from_the_returned_storage(small):
    model, data = small

    class Written(al.losses.Loss):  # separate operations: each buffer is one an operation returns
        def sum(self, pred, target):
            return ((pred - target) ** 2).sum()

    kept = al.memory.loss_storage(model, data[:8], loss=Written("mse"))
    # no kernel frees a buffer of its own here, and the 4-B loss is not counted as one
    assert kept["loss"] == 4 and kept["temporary"] == 0
    assert al.memory.loss_storage(model, data[:8])["temporary"] == kept["output"]  # F.mse_loss


def test_the_floor_is_what_exists_during_optimizer_step(small):
    model, data = small
    floor = al.memory.floor_bytes(model, "adam")
    for m in (32, 8):  # the same whatever the micro-batch: no micro-batch size removes it
        # + 4 bytes: train_step's running loss total, a 0-d float32 tensor
        assert al.memory.step_phase_bytes(model, data, m) == floor + 4
    # a loop that keeps its last micro-batch bound holds its data and the loss's storage too
    held = al.memory.step_phase_bytes(model, data, 8, hold_last_batch=True)
    loss = al.memory.loss_storage(model, data[:8])["loss"]
    assert held == floor + 4 + al.memory.data_bytes(data[:8]) + loss
    # SGD: no state, no step temporaries beyond its own arithmetic
    assert al.memory.step_phase_bytes(model, data, 8, optimizer="sgd") >= (
        al.memory.floor_bytes(model, "sgd")
    )


def test_memory_sweep_is_json_and_falls_with_k(small):
    model, data = small
    sweep = al.memory.memory_sweep(
        model, data, [32, 8, 2], optimizer="sgd_momentum", peak_sizes=[32, 8]
    )
    json.dumps(sweep)
    assert sweep["accumulation_steps"] == [1, 4, 16]
    assert sweep["activations"][0] == 4 * sweep["activations"][1] == 16 * sweep["activations"][2]
    assert sweep["parts"]["optimizer state"] == sweep["parts"]["parameters"]
    assert sweep["peak"][2] is None and sweep["peak"][0] > sweep["peak"][1] >= sweep["estimate"][1]
    with pytest.raises(ValueError, match="micro_sizes"):
        al.memory.memory_sweep(model, data, [])
    with pytest.raises(ValueError, match="micro_sizes"):
        al.memory.memory_sweep(model, data, "32")


def test_checkpointing_keeps_fewer_bytes_and_same_gradients():
    model, data = al.memory.memory_setup(width=8, depth=6, global_batch=16)
    plain = al.memory.activation_bytes(model, data)
    cp = al.memory.activation_bytes(model, data, segments=3)
    assert cp < plain
    assert al.memory.checkpoint_grad_gap(model, data, segments=3) == 0.0
    # one segment per layer: every layer input is held, nothing saved
    assert al.memory.activation_bytes(model, data, segments=7) == plain


def test_checkpoint_inputs_are_seen_by_the_outer_saved_tensor_hooks():
    model, data = al.memory.memory_setup(width=8, depth=4, global_batch=4)
    net = Checkpointed(model, 3)
    assert len(net.pieces) == 3 and all(isinstance(p[0], torch.nn.Linear) for p in net.pieces)
    seen = {}
    net.pieces[1].register_forward_pre_hook(lambda _, args: seen.setdefault("input", args[0]))
    net.pieces[0][0].register_forward_hook(lambda *a: seen.setdefault("inside", a[2]))
    saved = saved_storages(lambda: net(data.x).sum(), exclude=[*model.parameters()])
    # the non-reentrant checkpoint saves a piece's input before entering its own hooks: the outer
    # hook packs it; what happens inside a checkpointed piece is recomputed, never saved
    assert _storage_key(data.x) in saved and _storage_key(seen["input"]) in saved
    assert _storage_key(seen["inside"]) not in saved
    with pytest.raises(ValueError, match="segments"):
        Checkpointed(model, 1)
    with pytest.raises(ValueError, match="segments"):
        Checkpointed(model, 6)  # 5 layers
    with pytest.raises(ValueError, match="Sequential"):
        Checkpointed(al.ScalarModel(), 2)


def test_live_saved_tensors_sees_backward_free_the_graph():
    w = torch.randn(4, 4, requires_grad=True)
    x = torch.randn(8, 4)
    with LiveSavedTensors(exclude=[w, x]) as live:
        y = torch.tanh(x @ w)  # saves its output: 8 × 4 float32
        assert live.bytes == 128
        y.sum().backward()
        assert live.bytes == 0
    assert live.peak == 128


def test_peak_saved_bytes_of_the_three_loops(small):
    model, data = small
    p = {
        loop: al.memory.peak_saved_bytes(model, data, 8, loop)
        for loop in ("full_batch", "accumulate", "sum_then_backward")
    }
    assert p["sum_then_backward"] == p["full_batch"] == 4 * p["accumulate"]
    with pytest.raises(ValueError, match="loop"):
        al.memory.peak_saved_bytes(model, data, 8, "sideways")


def test_logging_growth(small):
    model, data = small
    tensor = al.memory.logging_growth(model, data, 8, log="tensor")
    item = al.memory.logging_growth(model, data, 8, log="item")
    evaluation = al.memory.logging_growth(model, data, 8, log="tensor", backward=False)
    diffs = {b - a for a, b in zip(tensor["graph_nodes"], tensor["graph_nodes"][1:], strict=False)}
    assert len(diffs) == 1 and diffs.pop() > 0
    assert set(item["graph_nodes"]) == {0} and set(tensor["alive_bytes"]) == {0}
    a = evaluation["alive_bytes"]
    assert a == [a[0] * (i + 1) for i in range(4)] and a[0] > 0
    # two fixes for an evaluation loop: .item() keeps no graph behind the total (the latest
    # micro-batch's graph lives only until the next one replaces it); no_grad builds none
    eval_item = al.memory.logging_growth(model, data, 8, log="item", backward=False)
    assert eval_item["alive_bytes"] == [a[0]] * 4 and set(eval_item["graph_nodes"]) == {0}
    quiet = al.memory.logging_growth(model, data, 8, log="tensor", backward=False, no_grad=True)
    assert set(quiet["alive_bytes"]) == {0} and set(quiet["graph_nodes"]) == {0}
    with pytest.raises(ValueError, match="log"):
        al.memory.logging_growth(model, data, 8, log="print")
    with pytest.raises(ValueError, match="no_grad"):
        al.memory.logging_growth(model, data, 8, no_grad=True)


def test_graph_nodes():
    assert al.memory.graph_nodes(1.0) == 0
    assert al.memory.graph_nodes(torch.ones(2)) == 0
    w = torch.ones(2, requires_grad=True)
    assert al.memory.graph_nodes((w * 2).sum()) == 3  # SumBackward → MulBackward → AccumulateGrad


def test_lesson05_graph_hints_name_the_mistake_made():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent / "exercise_corpus" / "lesson05.py"
    spec = importlib.util.spec_from_file_location("corpus_lesson05_hints", path)
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    wrong = dict(corpus.WRONG["05.3"])
    hints = {label: says for label, says in corpus.HINTS.items() if label in wrong}
    assert len(hints) >= 5
    for label, says in hints.items():
        result = al.check("05.3", wrong[label])
        assert not result.ok and says in result.message, (label, result.message)


def test_adams_step_counters_count_only_where_they_live():
    # on a GPU torch keeps Adam's step counters in host memory (unless capturable or fused): the
    # device holds the two moments only
    from cuda_layer import SimulatedGpu

    cpu_model, _ = al.memory.memory_setup(width=16, depth=2, global_batch=8)
    n_tensors = len(list(cpu_model.parameters()))
    P = param_bytes(cpu_model)
    assert al.memory.optimizer_state_bytes(cpu_model, "adam") == 2 * P + 4 * n_tensors
    with SimulatedGpu():
        model, _ = al.memory.memory_setup(width=16, depth=2, global_batch=8, device="cuda")
        assert al.memory.optimizer_state_bytes(model, "adam") == 2 * P


def test_the_loss_temporary_adds_one_float_per_thread_when_the_sum_splits():
    model, data = al.memory.memory_setup(width=128, depth=1, global_batch=256)
    before = torch.get_num_threads()
    try:
        found = {}
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            kept = al.memory.loss_storage(model, data)  # 256 x 128 outputs: torch's grain size
            found[threads] = kept["temporary"] - kept["output"]
    finally:
        torch.set_num_threads(before)
    # lesson 05 asserts exactly this: the kernel's buffer, + the sum's per-thread partials
    assert found == {1: 0, 2: 8, 3: 12}
