"""The audit's check of where a step's gradient came from (accumlab/audit/provenance.py): loops
that compute the window's gradient elsewhere (a copy of the model, another thread) and write it
into .grad behind backward passes that add nothing, or next to nothing, are named; right loops
that divide, unscale or clip .grad themselves are not."""

import copy
import dataclasses
import threading

import pytest
import torch
import torch.nn.functional as F

# the same loops serve exercise 08.2's corpus: one definition, judged by the audit here
from exercise_corpus.lesson08 import _buffered_outside_grad as buffered_outside_grad
from exercise_corpus.lesson08 import _online_mean as online_mean
from exercise_corpus.lesson08 import _retained_decoys as retained_decoys_then_one_backward

import accumlab as al
from accumlab.audit import provenance


def _windows(batches, k):
    for start in range(0, len(batches), k):
        yield batches[start : start + k]


def _big_batch(model, window):
    x = torch.cat([x for x, _ in window])
    y = torch.cat([y for _, y in window])
    return F.mse_loss(model(x), y)


def twin_and_zero_decoys(model, optimizer, batches, k):
    for window in _windows(batches, k):
        for x, _ in window:
            (model(x).sum() * 0).backward()
        twin = copy.deepcopy(model)
        _big_batch(twin, window).backward()
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            p.grad = q.grad
        optimizer.step()
        optimizer.zero_grad()


def tiny_honest_passes_then_written(model, optimizer, batches, k):
    """Each backward adds its own micro-batch's gradient, 1e-4 of its weight; then the copy's."""
    for window in _windows(batches, k):
        n = sum(len(x) for x, _ in window)
        for x, y in window:
            (F.mse_loss(model(x), y, reduction="sum") / n * 1e-4).backward()
        twin = copy.deepcopy(model)
        _big_batch(twin, window).backward()
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            p.grad = q.grad
        optimizer.step()
        optimizer.zero_grad()


def big_batch_in_a_thread(model, optimizer, batches, k):
    for window in _windows(batches, k):
        out = {}

        def work(window=window, out=out):
            twin = copy.deepcopy(model)
            _big_batch(twin, window).backward()
            out.update({n: q.grad.clone() for n, q in twin.named_parameters()})

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        for x, _ in window:
            (model(x).sum() * 0).backward()
        for n, p in model.named_parameters():
            p.grad = out[n]
        optimizer.step()
        optimizer.zero_grad()


def summed_then_divided(model, optimizer, batches, k):
    """Right: summed losses, .grad divided by the window's samples before the step."""
    for window in _windows(batches, k):
        for x, y in window:
            F.mse_loss(model(x), y, reduction="sum").backward()
        n = sum(len(x) for x, _ in window)
        for p in model.parameters():
            p.grad /= n
        optimizer.step()
        optimizer.zero_grad()


def by_autograd_grad(model, optimizer, batches, k):
    """Right: torch.autograd.grad per micro-batch, summed into .grad by hand."""
    params = list(model.parameters())
    for window in _windows(batches, k):
        n = sum(len(x) for x, _ in window)
        total = [torch.zeros_like(p) for p in params]
        for x, y in window:
            grads = torch.autograd.grad(F.mse_loss(model(x), y, reduction="sum") / n, params)
            total = [t + g for t, g in zip(total, grads, strict=True)]
        for p, t in zip(params, total, strict=True):
            p.grad = t
        optimizer.step()
        optimizer.zero_grad()


FOREIGN = [
    (twin_and_zero_decoys, "added nothing"),
    (tiny_honest_passes_then_written, "more than k / the window"),
    (big_batch_in_a_thread, "added nothing"),
]


@pytest.mark.parametrize("loop, words", FOREIGN, ids=[f.__name__ for f, _ in FOREIGN])
def test_a_gradient_written_in_is_named(loop, words):
    report = al.audit(loop, **al.audit.audit_setup("uneven"))
    assert report.ok, report  # the gradients themselves match: only their origin is wrong
    assert words in report.foreign_gradient


@pytest.mark.parametrize("loop", [summed_then_divided, by_autograd_grad])
def test_right_loops_that_touch_grad_themselves_pass(loop):
    report = al.audit(loop, **al.audit.audit_setup("uneven"))
    assert report.ok and report.foreign_gradient == "", report


def test_the_packages_correct_loop_passes_on_every_model():
    from accumlab.audit.loops import correct_loop

    for setup in ("regression", "batchnorm", "float32"):
        report = al.audit(correct_loop, **al.audit.audit_setup(setup))
        assert report.ok and report.foreign_gradient == "", (setup, report)


def test_the_weight_bound_is_what_names_the_tiny_passes(monkeypatch):
    setup = al.audit.audit_setup("uneven")
    report = al.audit(tiny_honest_passes_then_written, **setup)
    assert "more than k / the window" in report.foreign_gradient
    real = provenance.foreign_gradient
    unbounded = lambda rec, s: real(rec, dataclasses.replace(s, k=10**9))  # noqa: E731
    monkeypatch.setattr("accumlab.audit.auditor.foreign_gradient", unbounded)
    assert al.audit(tiny_honest_passes_then_written, **setup).foreign_gradient == ""


def autograd_of_means_weighted(model, optimizer, batches, k):
    """Right: torch.autograd.grad of each mean loss, weighted by its share when summed."""
    params = list(model.parameters())
    for window in _windows(batches, k):
        n = sum(len(y) for _, y in window)
        total = [torch.zeros_like(p) for p in params]
        for x, y in window:
            grads = torch.autograd.grad(F.mse_loss(model(x), y), params)
            total = [t + g * (len(y) / n) for t, g in zip(total, grads, strict=True)]
        for p, t in zip(params, total, strict=True):
            p.grad = t
        optimizer.step()
        optimizer.zero_grad()


@pytest.mark.parametrize("loop", [buffered_outside_grad, online_mean, autograd_of_means_weighted])
def test_right_loops_that_weigh_or_move_their_passes_pass(loop):
    report = al.audit(loop, **al.audit.audit_setup("uneven"))
    assert report.ok and report.foreign_gradient == "", report.foreign_gradient


def test_one_backward_through_retained_graphs_counts_them_together():
    report = al.audit(retained_decoys_then_one_backward, **al.audit.audit_setup("uneven"))
    assert report.graphs_together == 4
