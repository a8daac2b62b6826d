"""Bad input at every public entry point: a clear error in accumlab's words, never a hang, a
silent result or an exception leaking from torch/matplotlib (see tests/fuzz_harness.py).

Adding cases: the core's rows are below; a topic's rows live in tests/fuzz_topics/<topic>.py,
run by tests/test_fuzz_topics.py in one worker.
  - `bad(target, label, call, *words)`: `call()` must raise ValueError/TypeError from accumlab's
    code whose message contains every word (name the parameter and the bad value);
  - `handled(target, label, call, ok)`: the right answer is a result; `ok(result)` says so;
  - `bad(..., no_processes=True)` for anything that launches: starting a process fails the case;
  - a command line is a `bad` case whose call runs the parser: exit status 2 with the words.
`target` is the name as reached from `al` ("run", "Data.to", "dist.launch"):
test_every_public_callable_has_a_case checks each callable `al.<name>` has at least one row.
Each case runs in a worker under an address-space limit with a per-case time limit; the
summary of a whole table: `python tests/fuzz_harness.py tests/test_fuzz_api.py`.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import torch
from fuzz_harness import PASS, Worker, bad, handled
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch import nn

import accumlab as al
from accumlab import graph

NAN, INF = float("nan"), float("inf")

# --- inputs the cases share (built inside the worker, when a case runs) -------------------------


def _data(n=8, features=4, **kw):
    return al.regression_data(n, features, **kw)


def _with(data, part: str, index, value):
    t = getattr(data, part).clone()
    t[index] = value
    return al.Data(t, data.y) if part == "x" else al.Data(data.x, t)


def _frozen():
    model = al.mlp()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _nan_model():
    model = al.mlp()
    with torch.no_grad():
        model[0].weight[1, 2] = NAN
    return model


def _chain(n: int) -> torch.Tensor:
    """A backward graph that is one chain of n multiplications."""
    w = torch.ones((), requires_grad=True)
    t = w
    for _ in range(n):
        t = t * 1.0
    return t


def _wide(n: int) -> torch.Tensor:
    """A shallow backward graph of about n nodes side by side."""
    w = torch.ones((), requires_grad=True)
    return torch.stack([w * float(i) for i in range(n)]).sum()


def _summed(samples: int) -> torch.Tensor:
    """Lesson 01's per-sample summed loss over `samples` samples: ~11 nodes per sample, all
    meeting at the same parameters (the shape Graphviz is slowest to lay out)."""
    model = al.mlp()
    x = torch.randn(samples, 4, dtype=torch.float64)
    return sum((model(x[i : i + 1]) ** 2).sum() for i in range(samples))


def _spin(*args):
    while True:
        pass


def _stub(model, data, micro_batch_size): ...


def _nan_grads(model, micro_batches):
    for p in model.parameters():
        p.grad = torch.full_like(p, NAN)


def _check_within(id, answer, seconds):
    from accumlab import exercises

    before = getattr(exercises, "TIME_LIMIT", None)
    exercises.TIME_LIMIT = seconds
    try:
        return al.check(id, answer)
    finally:
        exercises.TIME_LIMIT = before


def _cli(*argv):
    from accumlab.dist.__main__ import parse

    return parse(list(argv))


def _mismatch(r) -> bool:
    """Every way a checker compares says 'different' (NaN compares False both ways)."""
    return r.max_abs > 1e-6 and r.max_rel > 1e-6 and r.rel_l2 > 1e-6 and not r.cosine > 0.999


def _not_ok(r) -> bool:
    return not r.ok


W = lambda: torch.ones(2, requires_grad=True)  # noqa: E731
ECHO = "accumlab.dist.faults:echo"

# one row per case reads as a table
# fmt: off
CASES = [
    # --- setup ---------------------------------------------------------------------------------
    bad("setup", "seed=-1", lambda: al.setup(seed=-1), "seed", "-1"),
    bad("setup", "seed=2**70", lambda: al.setup(seed=2**70), "seed", str(2**70)),
    bad("setup", "seed='0'", lambda: al.setup(seed="0"), "seed", "'0'"),
    bad("setup", "fast='no'", lambda: al.setup(fast="no"), "fast", "'no'"),
    # --- Data ----------------------------------------------------------------------------------
    bad("Data", "x a list", lambda: al.Data([1.0, 2.0], torch.ones(2, 1)), "x", "list"),
    bad("Data", "0-d tensors", lambda: al.Data(torch.tensor(1.0), torch.tensor(1.0)), "0-d"),
    bad("Data", "lengths differ", lambda: al.Data(torch.ones(3, 1), torch.ones(2, 1)), "len(x)=3"),
    bad("Data.micro_batches", "'4'", lambda: _data().micro_batches("4"), "micro_batch_size", "'4'"),
    bad("Data.micro_batches", "0", lambda: _data().micro_batches(0), "micro_batch_size", "0"),
    bad("Data.first_window", "k=0", lambda: _data().first_window(2, 0), "accumulation_steps"),
    bad("Data.to", "'cuda' on a CPU machine", lambda: _data().to("cuda"), "no CUDA device"),
    bad("Data.to", "'tpu'", lambda: _data().to("tpu"), "'tpu'"),
    bad("Data.to", "int64", lambda: _data().to(torch.int64), "dtype", "int64"),
    bad("Data.to", "'float32' as a string", lambda: _data().to("float32"), "'float32'"),
    bad("Data[]", "a string index", lambda: _data()["a"], "index", "'a'"),
    # --- generators ----------------------------------------------------------------------------
    bad("classic_data", "dtype=int64", lambda: al.classic_data(torch.int64), "dtype", "int64"),
    bad("classic_data", "dtype='float64'", lambda: al.classic_data("float64"), "dtype"),
    bad("regression_data", "n='8'", lambda: al.regression_data("8"), "n", "'8'"),
    bad("regression_data", "n=10**12", lambda: al.regression_data(10**12), "n=1000000000000"),
    bad("regression_data", "features=10**9", lambda: al.regression_data(64, 10**9), "features=1000000000"),
    bad("regression_data", "noise=nan", lambda: al.regression_data(noise=NAN), "noise", "nan"),
    bad("regression_data", "noise='0.1'", lambda: al.regression_data(noise="0.1"), "noise"),
    bad("regression_data", "noise=-1", lambda: al.regression_data(noise=-1.0), "noise", "-1"),
    bad("regression_data", "seed=2**70", lambda: al.regression_data(seed=2**70), "seed"),
    bad("regression_data", "seed=1.5", lambda: al.regression_data(seed=1.5), "seed", "1.5"),
    bad("regression_data", "dtype=int64", lambda: al.regression_data(dtype=torch.int64), "dtype"),
    bad("regression_data", "dtype='float32'", lambda: al.regression_data(dtype="float32"), "dtype"),
    bad("classification_data", "classes=10**9", lambda: al.classification_data(classes=10**9), "classes=1000000000"),
    bad("classification_data", "spread=nan", lambda: al.classification_data(spread=NAN), "spread"),
    bad("classification_data", "shift=inf", lambda: al.classification_data(shift=INF), "shift"),
    bad("classification_data", "n=10**11", lambda: al.classification_data(n=10**11), "n="),
    bad("token_data", "lengths='abc'", lambda: al.token_data(lengths="abc"), "lengths", "str"),
    bad("token_data", "lengths a set", lambda: al.token_data(lengths={3, 4}), "lengths", "set"),
    bad("token_data", "lengths=[10**9]", lambda: al.token_data(lengths=[10**9]), "lengths"),
    bad("token_data", "n=10**10", lambda: al.token_data(10**10), "n", "10000000000"),
    bad("token_data", "max_len=10**9", lambda: al.token_data(max_len=10**9), "max_len"),
    bad("token_data", "vocab='32'", lambda: al.token_data(vocab="32"), "vocab", "'32'"),
    bad("token_data", "seed=-3", lambda: al.token_data(seed=-3), "seed", "-3"),
    # --- models --------------------------------------------------------------------------------
    bad("mlp", "depth=10**6", lambda: al.mlp(depth=10**6), "depth", "1000000"),
    bad("mlp", "hidden=10**6, depth=3", lambda: al.mlp(hidden=10**6, depth=3), "hidden=1000000"),
    bad("mlp", "features='4'", lambda: al.mlp("4"), "features", "'4'"),
    bad("mlp", "norm='Batch'", lambda: al.mlp(norm="Batch"), "norm", "'Batch'", "'batch'"),
    bad("mlp", "groups=0", lambda: al.mlp(norm="group", groups=0), "groups", "0"),
    bad("mlp", "dropout='0.1'", lambda: al.mlp(dropout="0.1"), "dropout", "'0.1'"),
    bad("mlp", "dropout=nan", lambda: al.mlp(dropout=NAN), "dropout", "nan"),
    bad("mlp", "seed=2**70", lambda: al.mlp(seed=2**70), "seed"),
    bad("mlp", "dtype=int64", lambda: al.mlp(dtype=torch.int64), "dtype", "int64"),
    bad("mlp", "dtype='float32'", lambda: al.mlp(dtype="float32"), "dtype", "'float32'"),
    bad("ScalarModel", "w=nan", lambda: al.ScalarModel(NAN), "w", "nan"),
    bad("ScalarModel", "w='a'", lambda: al.ScalarModel("a"), "w", "'a'"),
    bad("ScalarModel", "dtype=int64", lambda: al.ScalarModel(dtype=torch.int64), "dtype"),
    bad("TinyLM", "vocab=10**10", lambda: al.TinyLM(vocab=10**10), "vocab"),
    bad("TinyLM", "dim=0", lambda: al.TinyLM(dim=0), "dim", "0"),
    bad("TinyLM", "dtype=int64", lambda: al.TinyLM(dtype=torch.int64), "dtype"),
    bad("TinyLM", "seed=-1", lambda: al.TinyLM(seed=-1), "seed", "-1"),
    # --- losses and optimizers -----------------------------------------------------------------
    bad("Loss", "'MSE'", lambda: al.Loss("MSE"), "'MSE'", "'mse'"),
    bad("Loss", "'cross-entropy'", lambda: al.Loss("cross-entropy"), "'cross_entropy'"),
    bad("Loss", "None", lambda: al.Loss(None), "None"),
    bad("Loss.__call__", "pred (4, 1), target (4,)", lambda: al.Loss("mse")(torch.zeros(4, 1), torch.zeros(4)), "(4, 1)", "(4,)"),
    bad("Loss.__call__", "mse with integer labels", lambda: al.Loss("mse")(torch.zeros(4, 1), torch.zeros(4, 1, dtype=torch.long)), "int64"),
    bad("Loss.__call__", "cross_entropy with float targets", lambda: al.Loss("cross_entropy")(torch.zeros(4, 3), torch.zeros(4)), "cross_entropy", "float32"),
    bad("Loss.__call__", "label 5 with 3 classes", lambda: al.Loss("cross_entropy")(torch.zeros(4, 3), torch.tensor([0, 1, 5, 2])), "5", "3 classes"),
    bad("Loss.__call__", "pred not a tensor", lambda: al.Loss("mse")([1.0], torch.zeros(1)), "pred", "list"),
    bad("get_loss", "'MSE'", lambda: al.get_loss("MSE"), "'MSE'", "'mse'"),
    bad("get_loss", "a list", lambda: al.get_loss(["mse"]), "loss", "['mse']"),
    bad("get_loss", "None", lambda: al.get_loss(None), "loss", "None"),
    bad("make_optimizer", "'SGD'", lambda: al.make_optimizer("SGD", [W()]), "'SGD'", "'sgd'"),
    bad("make_optimizer", "no parameters", lambda: al.make_optimizer("sgd", []), "params"),
    bad("make_optimizer", "lr=nan", lambda: al.make_optimizer("sgd", [W()], NAN), "lr", "nan"),
    bad("make_optimizer", "lr=-1", lambda: al.make_optimizer("sgd", [W()], -1.0), "lr", "-1"),
    bad("make_optimizer", "lr=inf", lambda: al.make_optimizer("adam", [W()], INF), "lr", "inf"),
    bad("make_optimizer", "lr='0.1'", lambda: al.make_optimizer("sgd", [W()], "0.1"), "lr"),
    bad("make_optimizer", "factory returns 5", lambda: al.make_optimizer(lambda p: 5, [W()]), "optimizer", "int"),
    bad("make_optimizer", "params a module", lambda: al.make_optimizer("sgd", al.mlp()), "params"),
    bad("make_optimizer", "params 'abc'", lambda: al.make_optimizer("sgd", "abc"), "params", "str"),
    bad("make_optimizer", "optimizer=5", lambda: al.make_optimizer(5, [W()]), "optimizer", "5"),
    # --- Recipe --------------------------------------------------------------------------------
    bad("Recipe", "micro_batch_size=0", lambda: al.Recipe(0), "micro_batch_size", "0"),
    bad("Recipe", "accumulation_steps='3'", lambda: al.Recipe(2, "3"), "accumulation_steps"),
    bad("Recipe", "clip_norm=nan", lambda: al.Recipe(2, clip_norm=NAN), "clip_norm", "nan"),
    bad("Recipe", "clip_norm=inf", lambda: al.Recipe(2, clip_norm=INF), "clip_norm", "inf"),
    bad("Recipe", "clip_norm='1'", lambda: al.Recipe(2, clip_norm="1"), "clip_norm", "'1'"),
    bad("Recipe", "clip_at='never'", lambda: al.Recipe(2, clip_at="never"), "clip_at"),
    bad("Recipe", "scheduler_step", lambda: al.Recipe(2, scheduler_step="epoch"), "scheduler_step"),
    bad("Recipe", "normalization='Mean'", lambda: al.Recipe(2, normalization="Mean"), "'mean'"),
    bad("Recipe.windows", "data 'abc'", lambda: al.Recipe(2).windows("abc"), "data", "str"),
    # --- run -----------------------------------------------------------------------------------
    bad("run", "recipe None", lambda: al.run(None, al.mlp(), _data()), "recipe", "NoneType"),
    bad("run", "model 'mlp'", lambda: al.run(al.Recipe(2), "mlp", _data()), "model", "str"),
    bad("run", "model None", lambda: al.run(al.Recipe(2), None, _data()), "model", "NoneType"),
    bad("run", "model without parameters", lambda: al.run(al.Recipe(2), nn.ReLU(), _data()), "model", "no parameters"),
    bad("run", "model all frozen", lambda: al.run(al.Recipe(2), _frozen(), _data()), "model", "requires_grad"),
    bad("run", "model holds nan", lambda: al.run(al.Recipe(2), _nan_model(), _data()), "model", "nan"),
    bad("run", "data 'abc'", lambda: al.run(al.Recipe(2), al.mlp(), "abc"), "data", "str"),
    bad("run", "data a tuple", lambda: al.run(al.Recipe(2), al.mlp(), (torch.ones(2, 4), torch.ones(2, 1))), "data", "tuple"),
    bad("run", "nan in x", lambda: al.run(al.Recipe(2), al.mlp(), _with(_data(), "x", (3, 1), NAN)), "data.x", "nan", "(3, 1)"),
    bad("run", "inf in y", lambda: al.run(al.Recipe(2), al.mlp(), _with(_data(), "y", (6, 0), INF)), "data.y", "inf", "(6, 0)"),
    bad("run", "no samples", lambda: al.run(al.Recipe(2), al.mlp(), al.Data(torch.ones(0, 4), torch.ones(0, 1))), "data", "no samples"),
    bad("run", "y (8,) vs output (8, 1)", lambda: al.run(al.Recipe(2), al.mlp(), al.Data(_data().x, _data().y[:, 0])), "(2, 1)", "(2,)"),
    bad("run", "y (8, 2) vs output (8, 1)", lambda: al.run(al.Recipe(2), al.mlp(), _data(outputs=2)), "(2, 1)", "(2, 2)"),
    bad("run", "5 features into a 4-feature model", lambda: al.run(al.Recipe(2), al.mlp(4), _data(features=5)), "(2, 5)"),
    bad("run", "float32 data, float64 model", lambda: al.run(al.Recipe(2), al.mlp(), _data(dtype=torch.float32)), "float32", "float64"),
    bad("run", "int64 x into a float model", lambda: al.run(al.Recipe(2), al.mlp(), al.Data(torch.ones(8, 4, dtype=torch.long), _data().y)), "int64", "float64"),
    bad("run", "loss='MSE'", lambda: al.run(al.Recipe(2), al.mlp(), _data(), loss="MSE"), "'MSE'", "'mse'"),
    bad("run", "cross_entropy on float targets", lambda: al.run(al.Recipe(2), al.mlp(), _data(), loss="cross_entropy"), "cross_entropy", "float64"),
    bad("run", "mse on class labels", lambda: al.run(al.Recipe(2), al.mlp(8, 16, 3), al.classification_data(8)), "(2, 3)", "(2,)"),
    bad("run", "optimizer='SGD'", lambda: al.run(al.Recipe(2), al.mlp(), _data(), optimizer="SGD"), "'SGD'", "'sgd'"),
    bad("run", "optimizer=5", lambda: al.run(al.Recipe(2), al.mlp(), _data(), optimizer=5), "optimizer", "5"),
    bad("run", "optimizer factory returns None", lambda: al.run(al.Recipe(2), al.mlp(), _data(), optimizer=lambda p: None), "optimizer", "None"),
    bad("run", "lr=nan", lambda: al.run(al.Recipe(2), al.mlp(), _data(), lr=NAN), "lr", "nan"),
    bad("run", "lr=inf", lambda: al.run(al.Recipe(2), al.mlp(), _data(), lr=INF), "lr", "inf"),
    bad("run", "lr=-0.1", lambda: al.run(al.Recipe(2), al.mlp(), _data(), lr=-0.1), "lr", "-0.1"),
    bad("run", "lr='0.01'", lambda: al.run(al.Recipe(2), al.mlp(), _data(), lr="0.01"), "lr", "'0.01'"),
    bad("run", "lr=None", lambda: al.run(al.Recipe(2), al.mlp(), _data(), lr=None), "lr", "None"),
    bad("run", "epochs=0", lambda: al.run(al.Recipe(2), al.mlp(), _data(), epochs=0), "epochs", "0"),
    bad("run", "epochs=2.0", lambda: al.run(al.Recipe(2), al.mlp(), _data(), epochs=2.0), "epochs", "2.0"),
    bad("run", "epochs=10**9", lambda: al.run(al.Recipe(2), al.mlp(), _data(), epochs=10**9), "epochs", "1000000000"),
    bad("run", "drop leaves no window", lambda: al.run(al.Recipe(4, 10**9, last_window="drop"), al.mlp(), _data()), "drop", "accumulation_steps"),
    bad("run", "record_grads='yes'", lambda: al.run(al.Recipe(2), al.mlp(), _data(), record_grads="yes"), "record_grads", "'yes'"),
    bad("run", "in_place='False'", lambda: al.run(al.Recipe(2), al.mlp(), _data(), in_place="False"), "in_place", "'False'"),
    bad("run", "scheduler=5", lambda: al.run(al.Recipe(2), al.mlp(), _data(), scheduler=5), "scheduler", "int"),
    bad("run", "scheduler returns None", lambda: al.run(al.Recipe(2), al.mlp(), _data(), scheduler=lambda o: None), "scheduler", "step"),
    # --- references and comparison -------------------------------------------------------------
    bad("full_batch_grads", "model 'x'", lambda: al.full_batch_grads("x", _data()), "model", "str"),
    bad("full_batch_grads", "model without parameters", lambda: al.full_batch_grads(nn.Tanh(), _data()), "model", "no parameters"),
    bad("full_batch_grads", "nan in x", lambda: al.full_batch_grads(al.mlp(), _with(_data(), "x", (0, 0), NAN)), "data.x", "nan"),
    bad("full_batch_grads", "y (8,)", lambda: al.full_batch_grads(al.mlp(), al.Data(_data().x, _data().y[:, 0])), "(8, 1)", "(8,)"),
    bad("full_batch_grads", "5 features", lambda: al.full_batch_grads(al.mlp(4), _data(features=5)), "(8, 5)"),
    bad("full_batch_grads", "loss='MSE'", lambda: al.full_batch_grads(al.mlp(), _data(), loss="MSE"), "'MSE'"),
    bad("accumulated_grads", "micro_batch_size='4'", lambda: al.accumulated_grads(al.mlp(), _data(), "4"), "micro_batch_size", "'4'"),
    bad("accumulated_grads", "accumulation_steps='2'", lambda: al.accumulated_grads(al.mlp(), _data(), 4, "2"), "accumulation_steps", "'2'"),
    bad("accumulated_grads", "drop drops the only window", lambda: al.accumulated_grads(al.mlp(), _data(), 4, 3, last_window="drop"), "drop"),
    bad("accumulated_grads", "nan in y", lambda: al.accumulated_grads(al.mlp(), _with(_data(), "y", (2, 0), NAN), 4), "data.y", "nan"),
    bad("accumulated_grads", "model None", lambda: al.accumulated_grads(None, _data(), 4), "model", "NoneType"),
    bad("accumulation_progress", "data 'abc'", lambda: al.accumulation_progress(al.mlp(), "abc", 2, 2), "data", "str"),
    bad("accumulation_progress", "k=0", lambda: al.accumulation_progress(al.mlp(), _data(), 2, 0), "accumulation_steps"),
    bad("accumulation_progress", "model 'm'", lambda: al.accumulation_progress("m", _data(), 2, 2), "model", "str"),
    handled("grad_diff", "nan in a", lambda: al.grad_diff({"w": torch.tensor([1.0, NAN])}, {"w": torch.tensor([1.0, 2.0])}), _mismatch),
    handled("grad_diff", "nan in both, same place", lambda: al.grad_diff({"w": torch.tensor([1.0, NAN])}, {"w": torch.tensor([1.0, NAN])}), _mismatch),
    handled("grad_diff", "inf in b", lambda: al.grad_diff(torch.tensor([1.0, 2.0]), torch.tensor([1.0, INF])), _mismatch),
    handled("grad_diff", "inf in a", lambda: al.grad_diff(torch.tensor([INF, 2.0]), torch.tensor([1.0, 2.0])), _mismatch),
    bad("grad_diff", "shapes (2,) and (2, 1)", lambda: al.grad_diff(torch.ones(2), torch.ones(2, 1)), "(2,)", "(2, 1)"),
    bad("grad_diff", "dict shapes (2,) and (2, 1)", lambda: al.grad_diff({"w": torch.ones(2)}, {"w": torch.ones(2, 1)}), "'w'", "(2,)", "(2, 1)"),
    bad("grad_diff", "a a list", lambda: al.grad_diff([1.0, 2.0], torch.ones(2)), "a", "list"),
    bad("flatten", "a list", lambda: al.flatten([torch.ones(2)]), "tensors", "list"),
    bad("flatten", "empty dict", lambda: al.flatten({}), "tensors", "dict"),
    bad("flatten", "a value not a tensor", lambda: al.flatten({"w": 1.0}), "tensors['w']", "float"),
    bad("grad_diff", "dict value a list", lambda: al.grad_diff({"w": [1.0]}, {"w": torch.ones(1)}), "'w'", "list"),
    bad("grad_diff", "b None", lambda: al.grad_diff(torch.ones(2), None), "b", "NoneType"),
    bad("grad_diff", "a 'abc'", lambda: al.grad_diff("abc", torch.ones(3)), "a", "str"),
    bad("grads_of", "'x'", lambda: al.grads_of("x"), "model", "str"),
    bad("params_of", "None", lambda: al.params_of(None), "model", "NoneType"),
    # --- graphs and saved tensors --------------------------------------------------------------
    bad("count_nodes", "'x'", lambda: al.count_nodes("x"), "tensor", "str"),
    bad("count_nodes", "None", lambda: al.count_nodes(None), "tensor", "NoneType"),
    bad("draw_graph", "params 'w'", lambda: al.draw_graph(_chain(2), "w"), "params", "str"),
    bad("draw_graph", "params a list", lambda: al.draw_graph(_chain(2), [W()]), "params", "list"),
    handled("draw_graph", "chain of 1500 ops", lambda: al.draw_graph(_chain(1500)), lambda g: len(g.nodes) == 1501),
    handled("GraphView", "shown: chain of 3000 ops", lambda: al.draw_graph(_chain(3000))._repr_mimebundle_(), lambda b: "3001" in b["text/plain"]),
    handled("GraphView", "shown: summed loss of 200 samples (2206 nodes)", lambda: al.draw_graph(_summed(200))._repr_mimebundle_(), lambda b: "2206 nodes" in b["text/plain"]),
    handled("GraphView", "shown: 2000 nodes side by side", lambda: al.draw_graph(_wide(2000))._repr_mimebundle_(), lambda b: "text/plain" in b),
    bad("saved_tensor_bytes", "fn 5", lambda: al.saved_tensor_bytes(5), "fn", "int"),
    bad("saved_tensor_bytes", "exclude 'abc'", lambda: al.saved_tensor_bytes(lambda: None, "abc"), "exclude", "str"),
    bad("saved_tensor_bytes", "exclude [1, 2]", lambda: al.saved_tensor_bytes(lambda: None, [1, 2]), "exclude", "int"),
    # --- figures, explorer, recorded results ---------------------------------------------------
    bad("plot_bars", "labels 'abc'", lambda: al.plot_bars("abc", [1, 2, 3], ylabel="y"), "labels", "str"),
    bad("plot_bars", "3 labels, 2 values", lambda: al.plot_bars(["a", "b", "c"], [1, 2], ylabel="y"), "labels", "values"),
    bad("plot_bars", "nan value", lambda: al.plot_bars(["a", "b"], [1, NAN], ylabel="y"), "values", "nan"),
    bad("plot_bars", "0 on a log axis", lambda: al.plot_bars(["a"], [0], ylabel="y", log=True), "values", "log"),
    bad("plot_bars", "values ['x']", lambda: al.plot_bars(["a"], ["x"], ylabel="y"), "values", "'x'"),
    bad("Explorer", "controls None", lambda: al.Explorer(None, dict, print), "controls", "NoneType"),
    bad("Explorer", "a control 5", lambda: al.Explorer({"k": 5}, dict, print), "controls", "int"),
    bad("Explorer", "compute 5", lambda: al.Explorer({}, 5, print), "compute", "int"),
    bad("describe_recorded", "meta without device", lambda: al.describe_recorded({"meta": {}}), "record", "device"),
    bad("describe_recorded", "'x'", lambda: al.describe_recorded("x"), "record", "str"),
    bad("load_recorded", "5", lambda: al.load_recorded(5), "name", "int"),
    bad("load_recorded", "'../x'", lambda: al.load_recorded("../x"), "name", "'../x'"),
    handled("load_recorded", "never recorded", lambda: al.load_recorded("no_such_result"), lambda r: r is None),
    # --- exercises -----------------------------------------------------------------------------
    handled("check", "02.1 answered nan", lambda: al.check("02.1", NAN), _not_ok),
    handled("check", "02.1 answered inf", lambda: al.check("02.1", INF), _not_ok),
    handled("check", "03.4 leaves nan in .grad", lambda: al.check("03.4", _nan_grads), _not_ok),
    handled("check", "a stub is not answered yet", lambda: al.check("02.2", _stub), lambda r: not r.ok and "not answered yet" in r.message),
    handled("check", "an endless loop is stopped", lambda: _check_within("02.2", _spin, 1.0), lambda r: not r.ok and "1 s" in r.message),
    bad("check", "id 2.1", lambda: al.check(2.1, 1), "2.1"),
    bad("check", "time_limit=-1", lambda: al.check("00.1", "cpu", time_limit=-1), "time_limit", "-1"),
    # --- the launcher and its command line: nothing may start before the input is checked -------
    bad("dist.launch", "world_size=0", lambda: al.dist.launch(ECHO, 0), "world_size", "0", no_processes=True),
    bad("dist.launch", "world_size=10**4", lambda: al.dist.launch(ECHO, 10**4), "world_size", "10000", no_processes=True),
    bad("dist.launch", "timeout=inf", lambda: al.dist.launch(ECHO, 2, timeout=INF), "timeout", "inf", no_processes=True),
    bad("dist.launch", "timeout=nan", lambda: al.dist.launch(ECHO, 2, timeout=NAN), "timeout", "nan", no_processes=True),
    bad("dist.launch", "timeout=-5", lambda: al.dist.launch(ECHO, 2, timeout=-5), "timeout", "-5", no_processes=True),
    bad("dist.launch", "timeout='60'", lambda: al.dist.launch(ECHO, 2, timeout="60"), "timeout", "'60'", no_processes=True),
    bad("dist.launch", "kwargs 'abc'", lambda: al.dist.launch(ECHO, 2, kwargs="abc"), "kwargs", "str", no_processes=True),
    bad("dist.launch", "kwargs {1: 2}", lambda: al.dist.launch(ECHO, 2, kwargs={1: 2}), "kwargs", "1", no_processes=True),
    bad("dist.launch", "kwargs with a lambda", lambda: al.dist.launch(ECHO, 2, kwargs={"f": lambda: 0}), "kwargs", "pickle", no_processes=True),
    bad("dist.launch", "task 5", lambda: al.dist.launch(5, 2), "task", "5", no_processes=True),
    bad("dist.launch", "task in no module", lambda: al.dist.launch("nomodule:fn", 2), "task", "nomodule", no_processes=True),
    bad("dist.launch", "device 'tpu'", lambda: al.dist.launch(ECHO, 2, device="tpu"), "device", "'tpu'", no_processes=True),
    bad("dist.launch", "plan 'gloo'", lambda: al.dist.launch(ECHO, 2, plan="gloo"), "plan", "str", no_processes=True),
    bad("dist.launch", "progress_total=-1", lambda: al.dist.launch(ECHO, 2, progress_total=-1), "progress_total", "-1", no_processes=True),
    bad("python -m accumlab.dist", "--timeout inf", lambda: _cli("--timeout", "inf"), "timeout", no_processes=True),
    bad("python -m accumlab.dist", "--timeout 0", lambda: _cli("--timeout", "0"), "timeout", no_processes=True),
    bad("python -m accumlab.dist", "--timeout -5", lambda: _cli("--timeout", "-5"), "timeout", no_processes=True),
    bad("python -m accumlab.dist", "--timeout nan", lambda: _cli("--timeout", "nan"), "timeout", no_processes=True),
    bad("python -m accumlab.dist", "--json into a missing folder", lambda: _cli("--json", "/no/such/folder/out.json"), "--json", "/no/such/folder", no_processes=True),
    bad("python -m accumlab.dist", "--world-size 10000", lambda: _cli("--world-size", "10000"), "world_size", "10000", no_processes=True),
]
# fmt: on

# Records accumlab hands back; lessons read their fields and never build one themselves.
NOT_ENTRY_POINTS = {"Env", "Event", "Trace", "GradDiff"}


# --- the tests ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def worker():
    w = Worker(__file__)
    yield w
    w.close()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, worker):
    result = worker.ask(case)
    assert result["verdict"] in PASS, f"{result['verdict']}: {result['detail']}"


def test_every_public_callable_has_a_case():
    covered = {c.target.split(".")[0].split("[")[0] for c in CASES}
    names = [n for n in al.__all__ if n not in al.TOPICS and callable(getattr(al, n))]
    missing = sorted(set(names) - covered - NOT_ENTRY_POINTS)
    assert not missing, f"public callables without a bad-input case: {missing}"


# --- properties over many bad values (hypothesis; in this process: nothing here allocates) -------

NOT_POSITIVE_INT = st.one_of(
    st.integers(max_value=0),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.none(),
    st.booleans(),
    st.lists(st.integers(1, 3), max_size=2),
)
FAST = settings(max_examples=40, deadline=None)


@FAST
@given(field=st.sampled_from(["micro_batch_size", "accumulation_steps"]), value=NOT_POSITIVE_INT)
def test_recipe_sizes_refuse_every_non_positive_integer(field, value):
    kwargs = {"micro_batch_size": 2, field: value}
    with pytest.raises(ValueError, match=field) as err:
        al.Recipe(**kwargs)
    assert repr(value)[:20] in str(err.value)


@FAST
@given(
    field=st.sampled_from(
        ["normalization", "last_window", "zero_grad", "clip_at", "scheduler_step"]
    ),
    value=st.one_of(
        st.text(max_size=12), st.none(), st.integers(), st.lists(st.text(), max_size=1)
    ),
)
def test_recipe_choices_refuse_anything_else(field, value):
    choices = {
        "normalization": al.NORMALIZATIONS,
        "last_window": al.LAST_WINDOW_POLICIES,
        "zero_grad": al.ZERO_GRAD_PLACEMENTS,
        "clip_at": al.CLIP_PLACEMENTS,
        "scheduler_step": al.SCHEDULER_STEPS,
    }[field]
    assume(value not in choices)
    with pytest.raises(ValueError, match=field) as err:
        al.Recipe(2, **{field: value})
    assert repr(value) in str(err.value)


@FAST
@given(
    lr=st.one_of(
        st.floats().filter(lambda v: not (math.isfinite(v) and v >= 0)), st.text(max_size=4)
    )
)
def test_run_refuses_a_learning_rate_that_is_not_a_finite_non_negative_number(lr):
    with pytest.raises(ValueError, match="lr"):
        al.run(al.Recipe(2), al.ScalarModel(), al.classic_data(), lr=lr)


@FAST
@given(seed=st.one_of(st.integers(max_value=-1), st.integers(min_value=2**32)))
def test_seeds_outside_numpys_range_are_refused_everywhere(seed):
    for make in (
        al.setup,
        lambda seed: al.regression_data(seed=seed),
        lambda seed: al.mlp(seed=seed),
    ):
        with pytest.raises(ValueError, match="seed"):
            make(seed=seed)


FLOATS = st.floats(-1e6, 1e6, allow_nan=False)


@FAST
@given(
    values=st.lists(FLOATS, min_size=1, max_size=6),
    bad=st.sampled_from([math.nan, math.inf, -math.inf]),
    where=st.integers(0, 5),
    side=st.sampled_from(["a", "b", "both"]),
)
def test_grad_diff_never_calls_a_non_finite_gradient_a_match(values, bad, where, side):
    a, b = torch.tensor(values, dtype=torch.float64), torch.tensor(values, dtype=torch.float64)
    for t in {"a": [a], "b": [b], "both": [a, b]}[side]:
        t[where % len(values)] = bad
    d = al.grad_diff({"w": a}, {"w": b})
    assert d.max_rel > 1e-9 and d.rel_l2 > 1e-9 and not d.cosine > 0.999 and not d.finite


@FAST
@given(dims=st.lists(st.integers(1, 3), min_size=1, max_size=3), extra=st.integers(0, 3))
def test_grad_diff_refuses_shapes_that_only_share_their_size(dims, extra):
    shape = tuple(dims)
    other = shape[:extra] + (1,) + shape[extra:]  # same values, one more dimension
    with pytest.raises(ValueError, match="shapes"):
        al.grad_diff(torch.ones(shape), torch.ones(other))


@FAST
@given(
    pred=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    target=st.lists(st.integers(1, 3), min_size=1, max_size=3),
)
def test_mse_refuses_any_shape_mismatch_instead_of_broadcasting(pred, target):
    p, t = torch.zeros(pred), torch.zeros(target)
    if tuple(pred) == tuple(target):
        assert al.Loss("mse")(p, t)[1] == t.numel()
    else:
        with pytest.raises(ValueError, match=re.escape(str(tuple(target)))):
            al.Loss("mse")(p, t)


# --- time limits and clean-up of anything that starts a process ---------------------------------


@pytest.mark.slow
def test_check_stops_an_endless_answer_inside_a_jupyter_kernel():
    # ipykernel runs cells in the kernel's main thread: the timer signal must work there
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = [
        "import time, accumlab as al\ndef spin(model, data, micro_batch_size):\n    while True:\n        pass",
        "t0 = time.monotonic()\nr = al.check('02.2', spin, time_limit=2)\n"
        "assert not r.ok and 'after 2 s' in r.message, r\nassert time.monotonic() - t0 < 60",
        "def stub(model, data, micro_batch_size): ...\nassert 'not answered yet' in al.check('02.2', stub).message",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()


@pytest.mark.slow
def test_graphviz_that_never_finishes_is_stopped_and_reaped(tmp_path, monkeypatch):
    fake = tmp_path / "dot"
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(300)\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(graph, "RENDER_SECONDS", 1.0)
    bundle = al.draw_graph(_chain(3))._repr_mimebundle_()
    assert "image/svg+xml" not in bundle and "did not finish within 1 s" in bundle["text/html"]
    _nothing_left(str(tmp_path))


def _nothing_left(marker: str):
    """No process whose command line names `marker` is still running (zombies are not)."""
    for p in psutil.process_iter(["cmdline", "status"]):
        if marker in " ".join(p.info["cmdline"] or []):
            assert p.info["status"] == psutil.STATUS_ZOMBIE, f"left running: {p.pid} {p.info}"


@pytest.fixture
def ranks(tmp_path, monkeypatch):
    """Launches land their folders in tmp_path; the ranks can import tests/fault_tasks.py."""
    tests = str(Path(__file__).parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    yield str(tmp_path)
    assert not list(tmp_path.glob("accumlab-dist-*")), "a launch left its folder behind"
    _nothing_left(str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize(
    "task, blamed",
    [
        ("fault_tasks:exit_on_rank", r"rank 1 of 2 exited with code 7 without reporting"),
        ("fault_tasks:segfault_on_rank", r"rank 1 of 2 was killed by signal 11 \(SIGSEGV\)"),
    ],
)
def test_the_rank_that_died_is_blamed_not_the_rank_left_waiting(ranks, task, blamed):
    with pytest.raises(al.dist.WorkerFailed, match=blamed) as err:
        al.dist.launch(task, 2, timeout=90)
    assert "(rank 0 then" in str(err.value)  # the waiting rank's error is context, not the cause


@pytest.mark.slow
@pytest.mark.parametrize("then", ["return", "raise"])
def test_a_grandchild_in_its_own_session_does_not_survive_the_launch(ranks, tmp_path, then):
    pid_file = tmp_path / "grandchild.pid"
    kwargs = {"pid_file": str(pid_file), "then": then}
    if then == "raise":
        with pytest.raises(al.dist.WorkerFailed, match="rank 1 of 2 raised RuntimeError"):
            al.dist.launch("fault_tasks:grandchild", 2, kwargs=kwargs, timeout=90)
    else:
        assert al.dist.launch("fault_tasks:grandchild", 2, kwargs=kwargs, timeout=90) == [0, 1]
    pid = int(pid_file.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_an_infinite_timeout_is_refused_before_anything_starts():
    before = set(psutil.Process().children(recursive=True))  # the fuzz worker may be running
    for timeout in (math.inf, math.nan, 0, -5):
        with pytest.raises(ValueError, match="timeout"):
            al.dist.launch(ECHO, 2, timeout=timeout)
    assert set(psutil.Process().children(recursive=True)) <= before


@pytest.mark.slow
def test_the_command_line_says_usage_for_a_bad_timeout_and_a_missing_json_folder(tmp_path):
    # the other bad values are fuzz cases above (the parser, in this process): here the real exit
    for argv in (["--timeout", "inf"], ["--json", str(tmp_path / "no" / "x.json")]):
        proc = subprocess.run(
            [sys.executable, "-m", "accumlab.dist", *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2 and "usage:" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_killed_launcher_leaves_no_worker_and_no_folder(tmp_path):
    code = (
        "import accumlab as al\nal.dist.launch('accumlab.dist.faults:hang_on_rank', 2, timeout=300)"
    )
    launcher = subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(tmp_path)}
    )
    try:
        deadline = time.monotonic() + 120
        while (
            time.monotonic() < deadline
            and len(list(tmp_path.glob("accumlab-dist-*/rank1.log"))) == 0
        ):
            time.sleep(0.1)
        assert list(tmp_path.glob("accumlab-dist-*")), "the launch never started"
        time.sleep(1.0)  # the ranks are importing torch: kill the launcher in the middle of it
        launcher.kill()  # SIGKILL: no clean-up code of the launcher runs
        launcher.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and list(tmp_path.glob("accumlab-dist-*")):
            time.sleep(0.1)
        assert not list(tmp_path.glob("accumlab-dist-*")), "the killed launcher's folder is left"
        deadline = time.monotonic() + 10  # the watcher may still be stopping the ranks
        while time.monotonic() < deadline:
            try:
                _nothing_left(str(tmp_path))
                break
            except AssertionError:
                time.sleep(0.1)
        _nothing_left(str(tmp_path))
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()


@pytest.mark.slow
def test_a_rank_that_fails_after_saving_its_result_is_named_without_a_key_error(ranks):
    with pytest.raises(al.dist.WorkerFailed, match=r"rank 1 of 2 finished its task, then exited"):
        al.dist.launch("fault_tasks:exit_after_result", 2, timeout=90)
