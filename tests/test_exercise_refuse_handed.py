"""`Refuse` sees through accumlab code that only runs what the answer handed it: a refused
function passed to `call_within` or `measure_peak`, or the answer itself a `functools.partial` of
it (a partial runs no Python frame, so the nearest caller is the checker)."""

import functools

import torch

import accumlab as al
from accumlab.device import measure_peak
from accumlab.exercises._limit import call_within
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
