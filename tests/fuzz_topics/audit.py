"""Lesson 08 (al.audit): bad inputs and what each must do. A learner's loop runs inside the audit,
so a loop that never ends or steps far too often must come back as a report that says so."""

from __future__ import annotations

from fuzz_harness import bad, handled
from matplotlib.figure import Figure

import accumlab as al

from . import NAN, spin

A = al.audit


def _many_steps(model, optimizer, batches, k, **kwargs):
    for _ in range(10**6):
        optimizer.step()


def _correct(model, optimizer, batches, k, **kwargs):
    return A.catalogue_loop("correct_loop").fn(model, optimizer, batches, k, **kwargs)


def _calls_forward(model, optimizer, batches, k, **kwargs):
    for x, y in batches:  # bypasses the model's hooks
        (model.forward(x) - y).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()


class _NeedsArgument:
    def __init__(self, k):
        self.k = k

    def __call__(self, model, optimizer, batches, k):
        return None


def _audit(train_fn, **kw):
    return A.audit(train_fn, **{**A.audit_setup(), **kw})


def _stopped(report, why: str) -> bool:
    """Stopped and said so: one finding, RUNAWAY_LOOP, naming what stopped it."""
    codes = [f.code for f in report.findings]
    return codes == ["RUNAWAY_LOOP"] and why in report.findings[0].message


# fmt: off
CASES = [
    handled("audit.audit", "train_fn spins without calling the model", lambda: _audit(spin, time_limit=1.0), lambda r: _stopped(r, "1 s"), slow=True),
    handled("audit.audit", "optimizer.step() 10**6 times", lambda: _audit(_many_steps), lambda r: _stopped(r, "optimizer.step()") and len(str(r)) < 2000),
    bad("audit.audit", "train_fn 5", lambda: A.audit(5, **A.audit_setup()), "train_fn", "int"),
    bad("audit.audit", "model 'x'", lambda: _audit(_correct, model="x"), "model", "str"),
    bad("audit.audit", "data 'x'", lambda: _audit(_correct, data="x"), "data", "str"),
    handled("audit.audit", "nan in data is located", lambda: _audit(_correct, data=al.Data(al.regression_data(40).x * NAN, al.regression_data(40).y)), lambda r: [f.code for f in r.findings] == ["NON_FINITE"] and "in the data" in r.findings[0].message),
    bad("audit.audit", "micro_batch_size=0", lambda: _audit(_correct, micro_batch_size=0), "micro_batch_size", "0"),
    bad("audit.audit", "accumulation_steps='4'", lambda: _audit(_correct, accumulation_steps="4"), "accumulation_steps", "'4'"),
    bad("audit.audit", "lr=nan", lambda: _audit(_correct, lr=NAN), "lr", "nan"),
    bad("audit.audit", "time_limit=0", lambda: _audit(_correct, time_limit=0), "time_limit", "0"),
    bad("audit.audit", "loss 'MSE'", lambda: _audit(_correct, loss="MSE"), "'MSE'", "'mse'"),
    bad("audit.audit", "scheduler 'yes'", lambda: _audit(_correct, scheduler="yes"), "scheduler", "'yes'"),
    bad("audit.audit", "last_window 'Drop'", lambda: _audit(_correct, last_window="Drop"), "last_window", "'drop'"),
    bad("audit.audit", "y (40,) against an output (40, 1)", lambda: _audit(_correct, data=al.Data(al.regression_data(40).x, al.regression_data(40).y[:, 0])), "(4, 1)", "(4,)"),
    bad("audit.audit_setup", "name 'regresion'", lambda: A.audit_setup("regresion"), "'regression'"),
    bad("audit.audit_setup", "an option al.audit does not take", lambda: A.audit_setup("regression", max_nrom=1.0), "max_nrom"),
    bad("audit.catalogue_loop", "'nope'", lambda: A.catalogue_loop("nope"), "'nope'"),
    bad("audit.catalogue_loop", "5", lambda: A.catalogue_loop(5), "name", "5"),
    bad("audit.plot_audit", "report 'x'", lambda: A.plot_audit("x"), "report", "str"),
    bad("audit.update_audit", "report 'x'", lambda: A.update_audit(Figure(), "x"), "report", "str"),
    bad("audit.audit", "epochs=0", lambda: _audit(_correct, epochs=0), "epochs", "0"),
    bad("audit.audit", "epochs='2'", lambda: _audit(_correct, epochs="2"), "epochs", "'2'"),
    bad("audit.audit", "epochs=2.5", lambda: _audit(_correct, epochs=2.5), "epochs", "2.5"),
    bad("audit.audit", "epochs=100", lambda: _audit(_correct, epochs=100), "epochs", "100", "at most"),
    bad("audit.audit", "last_window 'Carry'", lambda: _audit(_correct, last_window="Carry"), "last_window", "'carry'"),
    handled("audit.audit", "a class whose __init__ needs an argument", lambda: _audit(_NeedsArgument), lambda r: [f.code for f in r.findings] == ["STEP_RAISED"] and "TypeError" in r.findings[0].message),
    bad("audit.audit_explorer", "names 'correct_loop'", lambda: A.audit_explorer("correct_loop"), "names", "str", "list or tuple"),
    bad("audit.audit_explorer", "names ['nope']", lambda: A.audit_explorer(["nope"]), "names", "'nope'"),
    bad("audit.audit_explorer", "names []", lambda: A.audit_explorer([]), "names", "empty"),
    bad("audit.audit_explorer", "names [5]", lambda: A.audit_explorer([5]), "names", "5"),
    bad("audit.audit_explorer", "a name twice", lambda: A.audit_explorer(["correct_loop", "correct_loop"]), "names", "repeat"),
    bad("audit.gallery_loop", "label 'Z'", lambda: A.gallery_loop("Z"), "label", "'Z'"),
    bad("audit.gallery_loop", "label 'a'", lambda: A.gallery_loop("a"), "label", "'a'", "did you mean 'A'"),
    bad("audit.gallery_loop", "label 1", lambda: A.gallery_loop(1), "label", "1"),
    bad("audit.compare_loops", "names 'correct_loop'", lambda: A.compare_loops("correct_loop"), "names", "str"),
    bad("audit.compare_loops", "names ['nope']", lambda: A.compare_loops(["nope"]), "names", "'nope'"),
    bad("audit.compare_loops", "names []", lambda: A.compare_loops([]), "names", "empty"),
    bad("audit.overflow_window", "scaler_step 'yes'", lambda: A.overflow_window("yes"), "scaler_step", "'yes'"),
    bad("audit.overflow_window", "outlier 'no'", lambda: A.overflow_window(True, outlier="no"), "outlier", "'no'"),
    bad("audit.audit", "model on the meta device", lambda: _audit(_correct, model=A.audit_setup()["model"].to("meta")), "model", "meta"),
    handled("audit.audit", "gradient through model.forward(x), not model(x)", lambda: _audit(_calls_forward), lambda r: [f.code for f in r.findings] == ["FORWARD_NOT_SEEN"] and "model(x)" in r.findings[0].message),
    handled("audit.overflow_window", "optimizer.step() writes NaN, scaler.step() skips", lambda: (A.overflow_window(False), A.overflow_window(True)), lambda r: r[0].nan and not r[1].moved and r[1].finite),
]
# fmt: on
