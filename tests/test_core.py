"""setup, data, models, losses, compare, graph, memory: small facts each module promises."""

import itertools
import shutil

import pytest
import torch

import accumlab as al
from accumlab import env as env_module


def test_setup_seeds_and_describes():
    env = al.setup(seed=3)
    a = torch.rand(3)
    al.setup(seed=3)
    assert torch.equal(a, torch.rand(3))
    assert env.device.type in ("cpu", "cuda") and env.cpu_count >= 1
    assert "torch" in str(env)


def test_setup_fast_mode_from_environment(monkeypatch):
    monkeypatch.setenv("ACCUMLAB_FAST", "1")
    assert al.setup().fast
    monkeypatch.setenv("ACCUMLAB_FAST", "0")
    assert not al.setup().fast


def test_data_is_deterministic_and_sliceable():
    a, b = al.regression_data(10, seed=5), al.regression_data(10, seed=5)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert len(a[2:5]) == 3 and len(a[4]) == 1
    assert [len(m) for m in a.micro_batches(4)] == [4, 4, 2]


def test_data_index_past_the_end_raises_so_iteration_ends():
    """Without it `list(data)` never ends (each index past the end was an empty Data)."""
    data = al.regression_data(n=3, features=2)
    assert [len(d) for d in itertools.islice(data, 5)] == [1, 1, 1]  # islice: fails, not hangs
    assert torch.equal(data[-3].x, data.x[:1])
    with pytest.raises(IndexError, match="index 3 is out of range for 3 samples"):
        data[3]
    with pytest.raises(ValueError, match="too many values to unpack"):
        x, y = data  # a micro-batch unpacked as if it were (x, y)


def test_token_data_padding_and_lengths():
    data = al.token_data(lengths=[3, 0, 5], vocab=7)
    assert data.lengths().tolist() == [3, 0, 5]
    assert (data.y[0, 3:] == al.IGNORE_INDEX).all() and (data.x[1] == 0).all()
    assert int(data.x.max()) < 7


def test_classification_data_shift():
    d = al.classification_data(400, 3, 2, shift=5.0)
    assert abs(float(d.x.mean()) - 5.0) < 1.5 and set(d.y.tolist()) <= {0, 1}


def test_models_are_seeded():
    a, b = al.mlp(3, 4, 2, seed=1), al.mlp(3, 4, 2, seed=1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    for norm in al.models.NORMS:
        assert al.mlp(3, 8, 1, norm=norm)(torch.zeros(4, 3, dtype=torch.float64)).shape == (4, 1)
    assert al.TinyLM(vocab=11)(torch.zeros(2, 5, dtype=torch.long)).shape == (2, 5, 11)


def test_loss_sum_over_count_is_pytorch_mean():
    pred, y = torch.randn(5, 3), torch.randn(5, 3)
    s, c = al.get_loss("mse")(pred, y)
    assert torch.allclose(s / c, torch.nn.functional.mse_loss(pred, y))
    logits, labels = torch.randn(2, 4, 6), torch.tensor([[1, 2, -100, -100], [3, -100, -100, -100]])
    s, c = al.get_loss("cross_entropy")(logits, labels)
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, 6), labels.reshape(-1))
    assert c == 3 and torch.allclose(s / c, ref)


def test_grad_diff_values():
    d = al.grad_diff({"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([1.0, 4.0])})
    assert d.max_abs == 2.0 and d.max_rel == 0.5 and 0 < d.cosine < 1
    same = al.grad_diff(torch.ones(3), torch.ones(3))
    assert same.max_abs == 0 and same.cosine == pytest.approx(1.0)


def _loss_graph():
    x = torch.tensor([4.0, 2.0])
    w = torch.tensor(1.0, requires_grad=True)
    return ((2 * x - w * x) ** 2).mean(), w


def test_draw_graph_text_fallback_without_dot(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert not env_module.has_dot()
    loss, w = _loss_graph()
    view = al.draw_graph(loss, {"w": w})
    assert view.dot is None
    assert [n.split("#")[0] for n in view.nodes] == [
        "MeanBackward0",
        "PowBackward0",
        "SubBackward0",
        "MulBackward0",
        "AccumulateGrad(w)",
    ]
    bundle = view._repr_mimebundle_()
    assert "image/svg+xml" not in bundle and "AccumulateGrad(w)" in bundle["text/plain"]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
def test_draw_graph_svg_with_dot():
    loss, w = _loss_graph()
    view = al.draw_graph(loss, {"w": w})
    assert view.dot is not None
    assert "<svg" in view._repr_mimebundle_()["image/svg+xml"]


def test_draw_graph_of_leaf_and_shared_nodes():
    w = torch.tensor(2.0, requires_grad=True)
    assert "no graph" in al.draw_graph(w).text
    y = w * w + w  # w reached through two paths: its node is listed once
    view = al.draw_graph(y, {"w": w})
    assert sum(n.startswith("AccumulateGrad") for n in view.nodes) == 1
    assert "(shown above)" in view.text
    with pytest.raises(ValueError, match="tensor must be"):
        al.draw_graph([1, 2])


def test_saved_tensor_bytes_counts_activations_exactly():
    x = torch.randn(32, 10, requires_grad=True)
    # exp saves its output: 32*10 float32 = 1280 bytes
    assert al.saved_tensor_bytes(lambda: x.exp()) == 32 * 10 * 4
    lin = torch.nn.Linear(10, 10)
    with_params = al.saved_tensor_bytes(lambda: lin(x))
    without = al.saved_tensor_bytes(lambda: lin(x), exclude=lin.parameters())
    assert with_params > without == 32 * 10 * 4  # Linear saves its input (and its weight)
    with pytest.raises(ValueError, match="callable"):
        al.saved_tensor_bytes(3)


def test_nothing_runs_at_import(tmp_path):
    import subprocess
    import sys

    code = "import torch; torch.manual_seed(7); a = torch.rand(1); import accumlab; b = torch.rand(1); torch.manual_seed(7); torch.rand(1); print((b == torch.rand(1)).item())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "True", out.stderr


# --- lesson 01: what a node saves, what backward frees, summed losses ---------------------------


def test_saved_tensors_of_reads_what_a_node_keeps_and_fails_after_backward():
    x = torch.tensor([4.0, 2.0])
    w = torch.tensor(1.0, requires_grad=True)
    prod = w * x
    saved = al.autograd.saved_tensors_of(prod.grad_fn)
    assert (
        torch.equal(saved["other"], x) and saved["self"] is None
    )  # only x's gradient path is needed
    prod.sum().backward()
    with pytest.raises(RuntimeError, match="freed"):
        al.autograd.saved_tensors_of(prod.grad_fn)
    with pytest.raises(ValueError, match="grad_fn"):
        al.autograd.saved_tensors_of(None)


def test_backward_frees_every_saved_byte_and_keeps_the_nodes():
    model = al.mlp(features=4, hidden=8, outputs=1, depth=1, seed=0)
    data = al.regression_data(n=8, features=4, seed=0)
    out = al.autograd.saved_bytes_around_backward(model, data)
    # counted by hand: the tanh output (8 x 8 float64, saved by two nodes, counted once) and the
    # prediction MSE saves (8 x 1)
    assert out["after_forward"] == 8 * 8 * 8 + 8 * 1 * 8 and out["after_backward"] == 0
    assert out["nodes_before"] == out["nodes_after"] > 4 and out["grads_filled"]
    assert all(p.grad is None for p in model.parameters())  # the caller's model is untouched
    # released node by node: first the prediction, then the tanh output, none at the end only
    steps = [alive for _, alive in out["during_backward"]]
    assert out["during_backward"][0] == ["DivBackward0", out["after_forward"]]
    assert sorted(set(steps), reverse=True) == [576, 512, 0] and steps == sorted(steps)[::-1]
    # the tanh output, saved by the last AddmmBackward0 and by TanhBackward0, outlives the first
    # holder to run: still alive as TanhBackward0 starts
    assert [alive for node, alive in out["during_backward"] if node == "TanhBackward0"] == [512]
    # a graph nothing refers to is freed without any backward
    assert out["before_drop"] == out["after_forward"] and out["after_drop"] == 0


def test_summed_losses_keep_the_bytes_of_a_batched_forward():
    data = al.regression_data(n=12, features=4, seed=0)
    model = al.mlp(features=4, hidden=16, depth=2, seed=0)
    rows = al.autograd.graph_growth(model, data, 6)
    assert [r["n"] for r in rows] == list(range(1, 7))
    ops = rows[0]["accumulated_nodes"] - len(list(model.parameters()))
    for r in rows:
        # two tanh outputs of 16 and one prediction per sample, 8 bytes each
        assert r["accumulated_saved_bytes"] == (16 + 16 + 1) * 8
        assert (
            r["summed_saved_bytes"]
            == r["n"] * r["accumulated_saved_bytes"]
            == r["batched_saved_bytes"]
        )
        assert r["summed_nodes"] == len(list(model.parameters())) + r["n"] * ops + r["n"] - 1
        assert r["batched_nodes"] == r["accumulated_nodes"]
    assert al.autograd.summed_loss_graph(model, data, 6) == rows[-1]
    with pytest.raises(ValueError, match="n must be at most"):
        al.autograd.graph_growth(model, data, 13)


def test_micro_batches_keep_one_micro_batch_and_the_sum_all_of_them():
    data = al.regression_data(n=12, features=4, seed=0)
    model = al.mlp(features=4, hidden=16, depth=2, seed=0)
    rows = al.autograd.graph_growth(model, data, 12, micro_batch=4)
    assert [r["n"] for r in rows] == [4, 8, 12]
    for r in rows:
        assert r["accumulated_saved_bytes"] == r["logged_saved_bytes"] == 4 * 33 * 8
        assert r["summed_saved_bytes"] == r["batched_saved_bytes"] == r["n"] * 33 * 8
    with pytest.raises(ValueError, match="multiple of micro_batch"):
        al.autograd.graph_growth(model, data, 10, micro_batch=4)


def _per_sample_and_per_forward(model, data, autocast=False):
    """What one forward saves, split by two forwards of 1 and 2 samples (with the MSE loss)."""
    import contextlib

    import torch.nn.functional as F

    keep = [*model.parameters(), data.x, data.y]

    def saved(k):
        region = (
            torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        )

        def run():
            with region:
                return F.mse_loss(model(data.x[:k]), data.y[:k], reduction="sum")

        return al.saved_tensor_bytes(run, exclude=keep)

    one, two = saved(1), saved(2)
    return two - one, 2 * one - two


@pytest.mark.parametrize("kind", ["weight_norm", "autocast"])
def test_a_forward_that_saves_weights_breaks_summed_equals_batched(kind):
    data = al.regression_data(n=8, features=4, seed=0)
    model = al.mlp(features=4, hidden=16, depth=2, seed=0)
    if kind == "weight_norm":
        net, autocast = al.autograd.weight_normed(model), False
    else:
        net, data, autocast = model.float(), data.to(dtype=torch.float32), True
    per_sample, per_forward = _per_sample_and_per_forward(net, data, autocast)
    assert per_forward > 0 and per_sample > 0
    if kind == "autocast":  # the bfloat16 copies of the weights whose layer input needs a gradient
        assert per_forward == 2 * (16 * 16 + 1 * 16)
    for m in (1, 2, 4):
        last = al.autograd.summed_loss_graph(net, data, 8, micro_batch=m, autocast=autocast)
        # the sum saves every forward's weights, n/m of them; the batched forward one forward's
        assert last["summed_saved_bytes"] == 8 * per_sample + (8 // m) * per_forward
        assert last["batched_saved_bytes"] == 8 * per_sample + per_forward
        assert last["accumulated_saved_bytes"] == m * per_sample + per_forward


def test_weight_normed_is_the_same_function_on_a_copy():
    model = al.mlp(features=4, hidden=16, depth=2, seed=0)
    x = al.regression_data(n=8, features=4, seed=0).x
    net = al.autograd.weight_normed(model)
    assert torch.allclose(net(x), model(x), rtol=1e-12, atol=1e-12)
    assert not any("parametrizations" in name for name, _ in model.named_parameters())


def test_flatten_orders_by_name_and_keeps_dtype():
    v = al.flatten({"b": torch.tensor([3.0, 4.0]), "a": torch.tensor([[1.0], [2.0]])})
    assert torch.equal(v, torch.tensor([1.0, 2.0, 3.0, 4.0]))
    assert al.flatten({"w": torch.ones(2, dtype=torch.bfloat16)}).dtype == torch.bfloat16


def test_finite_tensors_names_the_path_of_a_nan_inside_a_nested_checkpoint():
    import torch

    from accumlab._validate_torch import finite_tensors

    ok = {"model": {"w": torch.ones(2)}, "opt": {"state": {0: {"m": torch.zeros(2)}}}, "step": 3}
    assert finite_tensors("checkpoint", ok) is ok
    bad = {"model": {"w": torch.ones(2)}, "opt": {"state": {0: {"m": torch.tensor([0.0, 1e40])}}}}
    bad["opt"]["state"][0]["m"] = bad["opt"]["state"][0]["m"].double() * 1e300
    with pytest.raises(ValueError, match=r"checkpoint\['opt'\]\['state'\]\[0\]\['m'\] holds inf"):
        finite_tensors("checkpoint", bad)
    with pytest.raises(ValueError, match=r"checkpoint\[1\] holds nan"):
        finite_tensors("checkpoint", [torch.ones(1), torch.tensor([float("nan")])])
    finite_tensors("checkpoint", {"ids": torch.tensor([1, 2])})  # integer tensors hold no NaN


def test_token_data_reads_numpy_and_tensor_integers_as_integers():
    import numpy as np

    a = al.token_data(lengths=[3, 4])
    for lengths in (np.array([3, 4]), [np.int64(3), torch.tensor(4)]):
        assert torch.equal(al.token_data(lengths=lengths).x, a.x)
    for bad in ([True, 3], [2.5, 3], [-1, 3]):
        with pytest.raises(ValueError, match=r"lengths\[0\]"):
            al.token_data(lengths=bad)


def test_seeding_a_model_leaves_the_cuda_generators_as_they_were(monkeypatch):
    """`seeded` must not reseed CUDA before CUDA starts (torch.manual_seed would, lazily), and
    once CUDA runs it seeds every CUDA generator and puts each one's state back."""
    from accumlab.models import seeded

    seeds, restored = [], []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: seeds.append(seed))
    monkeypatch.setattr(torch.cuda, "manual_seed", lambda seed: seeds.append(seed))
    with seeded(7):
        torch.randn(2)
    assert seeds == []  # CUDA not started: its generators untouched

    state = torch.zeros(8, dtype=torch.uint8)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device="cuda": state)
    monkeypatch.setattr(
        torch.cuda, "set_rng_state", lambda s, device="cuda": restored.append(device)
    )
    with seeded(7):
        torch.randn(2)
    assert seeds == [7] and sorted(restored) == [0, 1]  # every CUDA generator seeded, then put back
