"""Lesson 11 (al.frameworks): bad inputs and what each must do. A learner's loop runs inside
`run_loop`, so a loop that never ends must be stopped and said so."""

from __future__ import annotations

import torch
from fuzz_harness import bad
from matplotlib.figure import Figure

import accumlab as al

from . import NAN, spin

F = al.frameworks


def _plain():
    return F.run_framework("plain_loop", "regression", 4)


def _forward_too_often(problem, model, optimizer, scheduler, folder):
    while True:
        for mb in problem.micro_batches():
            model(mb.x)


def _returns_5(problem, model, optimizer, scheduler, folder):
    return 5


def _engine():
    model = al.mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return F.StandInEngine(
        model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, F.lr_factor), 2
    )


def _tiny_table():
    runs = {
        d: {n: F.run_framework(n, d, 2) for n in ("reference", "plain_loop")}
        for d in ("regression", "tokens")
    }
    return F.framework_table(runs)


# fmt: off
CASES = [
    bad("frameworks.make_problem", "data 'Regression'", lambda: F.make_problem("Regression"), "data", "'regression'"),
    bad("frameworks.make_problem", "k=11", lambda: F.make_problem("regression", 11), "k", "11"),
    bad("frameworks.make_problem", "lr=nan", lambda: F.make_problem(lr=NAN), "lr", "nan"),
    bad("frameworks.lr_factor", "step=-1", lambda: F.lr_factor(-1), "step", "-1"),
    bad("frameworks.lr_factor", "step '1'", lambda: F.lr_factor("1"), "step", "'1'"),
    bad("frameworks.run_framework", "name 'Accelerate'", lambda: F.run_framework("Accelerate"), "name", "'accelerate'"),
    bad("frameworks.run_framework", "k=0", lambda: F.run_framework("reference", k=0), "k", "0"),
    bad("frameworks.run_framework", "an option the runner does not take", lambda: F.run_framework("plain_loop", foo=1), "foo"),
    bad("frameworks.run_loop", "runner 5", lambda: F.run_loop(5), "runner", "int"),
    bad("frameworks.run_loop", "runner spins without calling the model", lambda: F.run_loop(spin, time_limit=1.0), "runner", "1 s", slow=True),
    bad("frameworks.run_loop", "runner forwards forever", lambda: F.run_loop(_forward_too_often), "runner", "forward"),
    bad("frameworks.run_loop", "runner returns 5", lambda: F.run_loop(_returns_5), "runner", "5"),
    bad("frameworks.run_loop", "data 'images'", lambda: F.run_loop(_returns_5, "images"), "data", "'images'"),
    bad("frameworks.run_loop", "time_limit=0", lambda: F.run_loop(_returns_5, time_limit=0), "time_limit", "0"),
    bad("frameworks.run_all", "names 'reference'", lambda: F.run_all("reference", progress=False), "names", "str"),
    bad("frameworks.run_all", "data ['images']", lambda: F.run_all(("reference",), ["images"], progress=False), "data", "'images'"),
    bad("frameworks.run_all", "k=0", lambda: F.run_all(("reference",), k=0, progress=False), "k", "0"),
    bad("frameworks.check_run", "run 'x'", lambda: F.check_run("x"), "run", "str"),
    bad("frameworks.final_weight_error", "reference 'x'", lambda: F.final_weight_error(_plain(), "x"), "reference", "str"),
    bad("frameworks.final_weight_error", "runs on different problems", lambda: F.final_weight_error(_plain(), F.run_framework("reference", "tokens")), "run", "reference"),
    bad("frameworks.framework_table", "runs {}", lambda: F.framework_table({}), "runs"),
    bad("frameworks.framework_table", "runs 'x'", lambda: F.framework_table("x"), "runs", "str"),
    bad("frameworks.framework_table", "a run 'x'", lambda: F.framework_table({"regression": {"reference": "x"}, "tokens": {"reference": "x"}}), "runs", "str"),
    bad("frameworks.FrameworkTable.row", "name 'x'", lambda: _tiny_table().row("x"), "name", "'x'"),
    bad("frameworks.plot_step_errors", "table 'x'", lambda: F.plot_step_errors("x"), "table", "str"),
    bad("frameworks.plot_step_errors", "data 'images'", lambda: F.plot_step_errors(_tiny_table(), data="images"), "data", "'images'"),
    bad("frameworks.plot_step_explorer", "data {}", lambda: F.plot_step_explorer({}), "data"),
    bad("frameworks.update_step_explorer", "data {}", lambda: F.update_step_explorer(Figure(), {}), "data"),
    bad("frameworks.framework_grid", "names 'reference'", lambda: F.framework_grid("reference", progress=False), "names", "str"),
    bad("frameworks.framework_grid", "ks [0]", lambda: F.framework_grid(("reference",), ks=[0], progress=False), "ks", "0"),
    bad("frameworks.framework_grid", "runs 'x'", lambda: F.framework_grid(("reference",), ks=[2], runs="x", progress=False), "runs", "str"),
    bad("frameworks.explore_frameworks", "grid {}", lambda: F.explore_frameworks({}, "reference", "regression", 2), "reference"),
    bad("frameworks.explore_frameworks", "grid 'x'", lambda: F.explore_frameworks("x", "reference", "regression", 2), "grid", "str"),
    bad("frameworks.explore_frameworks", "a grid value 'junk'", lambda: F.explore_frameworks({("reference", "regression", 2): "junk"}, "reference", "regression", 2), "grid", "junk"),
    bad("frameworks.make_problem", "dtype float16", lambda: F.make_problem(dtype=torch.float16), "dtype", "float16"),
    bad("frameworks.run_framework", "epochs for a runner without them", lambda: F.run_framework("reference", epochs=2), "epochs"),
    bad("frameworks.framework_explorer", "grid {}", lambda: F.framework_explorer({}), "grid"),
    bad("frameworks.framework_explorer", "grid 'x'", lambda: F.framework_explorer("x"), "grid", "str"),
    bad("frameworks.trainer_loop", "problem 'x'", lambda: F.trainer_loop("x", None, None, None, "/tmp"), "problem", "str"),
    bad("frameworks.trainer_loop", "mode 'sum'", lambda: F.trainer_loop(F.make_problem(), None, None, None, "/tmp", mode="sum"), "mode", "'sum'"),
    bad("frameworks.StandInEngine", "gradient_accumulation_steps=0", lambda: F.StandInEngine(al.mlp(), None, None, 0), "gradient_accumulation_steps", "0"),
    bad("frameworks.StandInEngine", "model 'x'", lambda: F.StandInEngine("x", None, None, 2), "model", "str"),
    bad("frameworks.StandInEngine", "managed 'no'", lambda: F.StandInEngine(al.mlp(), torch.optim.SGD(al.mlp().parameters(), lr=0.1), torch.optim.lr_scheduler.LambdaLR(torch.optim.SGD(al.mlp().parameters(), lr=0.1), F.lr_factor), 2, managed="no"), "managed", "'no'"),
    bad("frameworks.deepspeed_batch_triple", "train_batch_size=0", lambda: F.deepspeed_batch_triple(0), "train_batch_size", "0"),
    bad("frameworks.deepspeed_batch_triple", "gradient_accumulation_steps '4'", lambda: F.deepspeed_batch_triple(16, gradient_accumulation_steps="4"), "gradient_accumulation_steps", "'4'"),
    bad("frameworks.run_framework", "epochs=0 for DeepSpeed", lambda: F.run_framework("deepspeed", epochs=0), "epochs", "0"),
    bad("frameworks.run_framework", "epochs=9 for DeepSpeed", lambda: F.run_framework("deepspeed", epochs=9), "epochs", "9"),
    # what a runner calls on the problem and the stand-in engine it is handed
    bad("frameworks.Problem.window_data", "window (99,)", lambda: F.make_problem().window_data((99,)), "window[0]", "99"),
    bad("frameworks.Problem.window_data", "window 'ab'", lambda: F.make_problem().window_data("ab"), "window", "str"),
    bad("frameworks.Problem.mean_loss", "pred of another shape", lambda: F.make_problem().mean_loss(torch.ones(2, 3, dtype=torch.float64), torch.ones(2, 1, dtype=torch.float64)), "(2, 3)", "(2, 1)"),
    bad("frameworks.Problem.sum_loss", "pred 'x'", lambda: F.make_problem().sum_loss("x", torch.ones(2, 1)), "pred", "str"),
    bad("frameworks.Problem.items", "y 'x'", lambda: F.make_problem().items("x"), "y", "str"),
    bad("frameworks.StandInEngine.backward", "loss 'x'", lambda: _engine().backward("x"), "loss", "str"),
    bad("frameworks.StandInEngine.backward", "a loss without a graph", lambda: _engine().backward(torch.tensor(1.0)), "loss", "no graph"),
    bad("frameworks.StandInEngine.backward", "a loss of 3 values", lambda: _engine().backward(torch.ones(3, requires_grad=True) * 2), "loss", "(3,)"),
    bad("frameworks.StandInEngine.backward", "scale_wrt_gas 'no'", lambda: _engine().backward(torch.ones((), requires_grad=True) * 2, scale_wrt_gas="no"), "scale_wrt_gas", "'no'"),
    bad("frameworks.StandInEngine.set_gradient_accumulation_boundary", "is_boundary 'yes'", lambda: _engine().set_gradient_accumulation_boundary("yes"), "is_boundary", "'yes'"),
]
# fmt: on
