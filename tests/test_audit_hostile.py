"""al.audit against bad input and hostile loops: dtype-aware tolerances, NaN, in-place changes,
loops that never end or call the optimizer a million times, absurd arguments."""

import math
import threading
import time

import pytest
import torch
import torch.nn.functional as F

import accumlab as al

CORRECT = al.audit.catalogue_loop("correct_loop").fn


def _in(dtype, **options):
    setup = al.audit.audit_setup(**options)
    setup["model"] = setup["model"].to(dtype)
    setup["data"] = setup["data"].to(dtype)
    return setup


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_tolerance_follows_the_dtype(dtype):
    report = al.audit(CORRECT, **_in(dtype))
    assert report.findings == [], str(report)
    assert report.rtol == al.audit.spec.RTOL_BY_DTYPE[dtype]
    # the looser tolerance still sees a real bug
    bug = al.audit(al.audit.catalogue_loop("loss_not_divided").fn, **_in(dtype))
    assert bug.codes == {"LOSS_NOT_DIVIDED"}, str(bug)


def test_measured_rounding_leaves_a_margin_under_each_tolerance():
    # the figures quoted in spec.py: a correct loop's worst step, well under the dtype's rtol
    for dtype, rtol in al.audit.spec.RTOL_BY_DTYPE.items():
        worst = max(c.rel_error for c in al.audit(CORRECT, **_in(dtype)).checks)
        assert worst < rtol / 5, (dtype, worst)


@pytest.mark.parametrize(("where", "said"), [("x", "inputs"), ("y", "targets")])
def test_nan_in_the_data_is_located(where, said):
    setup = al.audit.audit_setup()
    getattr(setup["data"], where)[9, 0] = float("nan")  # sample 9: micro-batch 2, its sample 1
    report = al.audit(CORRECT, **setup)
    assert "NON_FINITE" in report.codes and not report.ok, str(report)
    assert (
        f"micro-batch 2's {said} hold NaN at its sample 1 (sample 9" in report["NON_FINITE"].message
    )
    assert "UNEXPLAINED_GRADIENT" not in report.codes


def test_nan_made_by_the_loop_is_located():
    def divides_by_zero(model, optimizer, batches, k):
        for i, (x, y) in enumerate(batches):
            tokens = 0 if i == 5 else 1  # a count that is 0 once
            (F.mse_loss(model(x), y) / tokens / k).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                optimizer.step()
                optimizer.zero_grad()

    report = al.audit(divides_by_zero, **al.audit.audit_setup())
    assert "NON_FINITE" in report.codes
    text = report["NON_FINITE"].message
    assert "gradient flowing back into the output of forward pass 5 (micro-batch 5)" in text
    # once the parameters are NaN the next forward's output is NaN: the first place is still step 1
    assert report["NON_FINITE"].evidence["steps with non-finite gradients"][0] == 1


def test_the_loop_gets_copies_of_the_batches():
    setup = al.audit.audit_setup()
    x, y = setup["data"].x.clone(), setup["data"].y.clone()

    def vandal(model, optimizer, batches, k):
        for x, y in batches:
            F.mse_loss(model(x), y).backward()
            x.mul_(2)
            y.zero_()
        optimizer.step()

    report = al.audit(vandal, **setup)
    assert "BATCH_MODIFIED" in report.codes
    assert torch.equal(setup["data"].x, x) and torch.equal(setup["data"].y, y)


def _within(seconds, fn):
    """Run fn in a thread; fail (instead of hanging the test run) if it does not return."""
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", fn()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the audit did not return"
    return out["value"]


def test_a_million_steps_stop_at_the_budget():
    def steps_forever(model, optimizer, batches, k):
        x, y = batches[0]
        F.mse_loss(model(x), y).backward()
        for _ in range(10**6):
            optimizer.step()

    report = _within(60, lambda: al.audit(steps_forever, **al.audit.audit_setup()))
    assert report.codes == {"RUNAWAY_LOOP"}
    assert "optimizer.step()" in report.findings[0].message
    # the budget covers both epochs' 10 micro-batches
    assert len(report.seen_steps) == al.audit.recording.limits_for(20)["steps"]
    assert len(str(report)) < 3000  # the report lists a bounded number of steps


@pytest.mark.parametrize("kind", ["pure_python", "swallows_exceptions", "zero_grad_only"])
def test_loops_that_never_return_are_stopped(kind):
    def spin(model, optimizer, batches, k):
        if kind == "pure_python":
            while True:
                pass
        elif kind == "swallows_exceptions":
            while True:
                try:
                    model(batches[0][0])
                except Exception:  # the audit's stop is not an Exception
                    pass
        else:
            while True:
                optimizer.zero_grad()

    setup = al.audit.audit_setup(time_limit=0.5)
    report = _within(60, lambda: al.audit(spin, **setup))
    assert report.codes == {"RUNAWAY_LOOP"}, str(report)
    assert "stopped it at line" in report.findings[0].message


def test_a_blocking_call_in_the_main_thread_is_stopped_by_the_alarm():
    import signal

    if signal.getsignal(signal.SIGALRM) != signal.SIG_DFL or signal.getitimer(
        signal.ITIMER_REAL
    ) != (0.0, 0.0):
        pytest.skip("SIGALRM is in use by the test runner: the audit leaves it alone")

    def sleeps(model, optimizer, batches, k):
        time.sleep(3600)

    report = al.audit(sleeps, **al.audit.audit_setup(time_limit=0.2))
    assert report.codes == {"RUNAWAY_LOOP"}
    assert "still running after 0.2 s" in report.findings[0].message
    # the alarm is disarmed and the handler restored
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL


def test_the_tracer_is_restored():
    import sys

    before = sys.gettrace()
    al.audit(CORRECT, **al.audit.audit_setup())
    assert sys.gettrace() is before


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("rtol", math.inf),
        ("rtol", 10.0),
        ("rtol", math.nan),
        ("rtol", 0.0),
        ("lr", math.inf),
        ("lr", math.nan),
        ("lr", -0.1),
        ("lr", 1e3),
        ("max_norm", math.inf),
        ("max_norm", math.nan),
        ("time_limit", 0),
        ("time_limit", math.inf),
        ("time_limit", 10**6),
        ("last_window", "divide_by_two"),
    ],
)
def test_absurd_arguments_are_refused_by_name(name, value):
    with pytest.raises(ValueError, match=name):
        al.audit(CORRECT, **al.audit.audit_setup(**{name: value}))


def test_too_many_micro_batches_and_frozen_models_are_refused():
    setup = al.audit.audit_setup()
    setup["data"] = al.regression_data(n=2002, features=4, seed=0)
    setup["micro_batch_size"] = 2
    with pytest.raises(ValueError, match="1000"):
        al.audit(CORRECT, **setup)
    setup = al.audit.audit_setup()
    setup["model"].requires_grad_(False)
    with pytest.raises(ValueError, match="trainable"):
        al.audit(CORRECT, **setup)
