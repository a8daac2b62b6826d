"""`Refuse` sees through accumlab code that only runs what the answer handed it: a refused
function passed to `call_within` or `measure_peak`, or the answer itself a `functools.partial` of
it (a partial runs no Python frame, so the nearest caller is the checker)."""

import functools
import sys
import threading
import time
import types

import pytest
import torch

import accumlab as al
from accumlab.device import measure_peak
from accumlab.exercises._calls import Refuse
from accumlab.exercises._limit import AnswerTimeout, call_within
from accumlab.exercises.lesson07 import fsdp_bytes_expected

REFUSED = "asks you to write it yourself"


def _check_refused(id_, answer, name):
    result = al.check(id_, answer)
    assert not result.ok and REFUSED in result.message and name in result.message, result.message


def test_a_partial_of_the_reference_is_refused():
    _check_refused("07.4", functools.partial(fsdp_bytes_expected), "fsdp_bytes_expected")


def test_the_reference_run_by_call_within_is_refused():
    def answer(shapes, world, element):
        return call_within(30, fsdp_bytes_expected, shapes, world, element)

    _check_refused("07.4", answer, "fsdp_bytes_expected")


def test_noise_scale_run_by_accumlab_helpers_is_refused():
    def through_call_within(grads):
        return call_within(30, al.scale.noise_scale, grads)["b_simple"]

    def through_measure_peak(grads):
        result, _ = measure_peak(functools.partial(al.scale.noise_scale, grads), "cpu")
        return result["b_simple"]

    _check_refused("13.1", through_call_within, "al.scale.noise_scale")
    _check_refused("13.1", through_measure_peak, "al.scale.noise_scale")


def test_accumulate_behind_a_watched_loop_is_refused():
    def answer(model, chunks):
        k = len(chunks)
        for mb in chunks:  # the loop the checker watches; its result is thrown away
            out = model(mb.x.to(torch.bfloat16)).float()
            (torch.nn.functional.mse_loss(out, mb.y.float()) / k).backward()
        model.zero_grad(set_to_none=True)
        main, _ = call_within(30, al.scale.accumulate, model, chunks, "float32 main_grad")
        return {n: g.float() for n, g in main.items()}

    _check_refused("12.3", answer, "al.scale.accumulate")


def test_accumulation_noise_run_by_call_within_is_refused():
    def answer(model, windows):
        k, b = len(windows[0]), len(windows[0][0][0])
        meter = call_within(30, al.scale.AccumulationNoise, model, b, k)
        for window in windows:
            for x, y in window:
                (0.5 * ((model(x).squeeze(1) - y) ** 2).mean() / k).backward()
            call_within(30, meter.window_done)
            model.zero_grad()
        meter.remove()
        return meter.b_simple

    _check_refused("13.2", answer, "AccumulationNoise")


# a copy of a refused function made before any check runs, as an earlier notebook cell would: a
# new function object holding the original code, which no guard on accumlab's bindings reaches
_NOISE_SCALE_COPY = types.FunctionType(
    al.scale.noise_scale.__code__, al.scale.noise_scale.__globals__, "mine"
)


def test_a_copy_handed_to_call_within_is_refused():
    def answer(grads):
        return call_within(30, _NOISE_SCALE_COPY, grads)["b_simple"]

    _check_refused("13.1", answer, "al.scale.noise_scale")


def test_a_copy_run_in_a_thread_is_refused():
    def answer(grads):
        out = []

        def work():
            try:
                out.append(_NOISE_SCALE_COPY(grads)["b_simple"])
            except Exception:  # the refusal swallowed: the check still refuses at its end
                out.append(1.0)

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        return out[0]

    _check_refused("13.1", answer, "al.scale.noise_scale")


def test_a_copy_run_with_the_profile_function_switched_off_is_refused():
    def answer(grads):
        sys.setprofile(None)
        return _NOISE_SCALE_COPY(grads)["b_simple"]

    result = al.check("13.1", answer)
    assert not result.ok and "sys.setprofile" in result.message, result.message


def test_accumlab_still_runs_a_refused_helper_itself():
    grads = torch.randn(16, 4, generator=torch.Generator().manual_seed(0)) + 1.0
    with Refuse("al.scale.noise._moments"):
        inside = al.scale.noise_scale(grads)
    assert inside == al.scale.noise_scale(grads)


def _marker():
    return None


def test_the_profile_function_before_is_called_and_handed_back():
    seen = []

    def earlier(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_name)

    sys.setprofile(earlier)
    try:
        with Refuse("al.scale.noise_scale"):
            _marker()
        assert sys.getprofile() is earlier
    finally:
        sys.setprofile(None)
    assert "_marker" in seen


def test_the_watch_ends_when_the_block_raises_or_times_out():
    def raises():
        raise ValueError("the answer's own error")

    for block, error in ((raises, ValueError), (lambda: call_within(0.2, time.sleep, 5), None)):
        with pytest.raises(error or AnswerTimeout):
            with Refuse("al.scale.noise_scale"):
                block()
        assert sys.getprofile() is None and threading.getprofile() is None
