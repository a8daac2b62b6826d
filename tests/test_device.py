"""The device interface every recorder and GPU branch uses (lessons 05–07): on the CPU a storage
tracker stands in for the CUDA allocator, and out-of-memory is emulated, so the same code runs."""

import pytest
import torch

from accumlab import device as dev


def test_meter_counts_allocations_frees_and_the_peak():
    keep = []

    def work():
        a = torch.empty(1000, dtype=torch.uint8)
        b = torch.empty(3000, dtype=torch.uint8)
        del a  # freed: the count falls, the peak stays
        keep.append((b, torch.empty(500, dtype=torch.uint8)))

    _, peak = dev.measure_peak(work, "cpu")
    assert (peak.peak, peak.end) == (4000, 3500)


def test_meter_sees_views_once_and_preexisting_storages_leave():
    x = torch.zeros(256)  # 1024 bytes that existed before the meter started
    with dev.MemoryMeter("cpu") as m:
        y = x.view(16, 16) + 1  # a new storage; the view itself allocates nothing
        assert m.now() == 1024
        del x, y  # x's storage (seen as an input) is freed: below the start
        assert m.now() == -1024
    assert m.peak == 1024


def test_foreach_adam_step_allocates_about_one_copy_of_the_parameters():
    # torch._foreach_sqrt(exp_avg_sq) for every parameter at once; the per-parameter loop holds
    # at most a few parameter-sized temporaries at a time
    params = [torch.nn.Parameter(torch.randn(64, 64)) for _ in range(8)]
    size = sum(p.numel() * 4 for p in params)
    peaks = {}
    for foreach in (True, False):
        opt = torch.optim.Adam(params, foreach=foreach)
        for p in params:
            p.grad = torch.ones_like(p)
        opt.step()  # creates the state
        peaks[foreach] = dev.measure_peak(opt.step, "cpu")[1].peak
    assert size - 64 <= peaks[True] <= size + 64
    assert peaks[False] <= 3 * 64 * 64 * 4 < peaks[True]


def test_run_capped_raises_an_out_of_memory_error_past_the_cap():
    def work():
        return torch.empty(4096, dtype=torch.uint8).sum()

    _, peak = dev.run_capped(work, "cpu", 10_000)
    assert peak.peak >= 4096
    with pytest.raises(torch.OutOfMemoryError, match="CPU stand-in") as err:
        dev.run_capped(work, "cpu", 1000)
    assert err.value.peak_bytes >= 4096


def test_bad_devices_are_clear_errors():
    with pytest.raises(ValueError, match="device"):
        dev.as_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            dev.as_device("cuda")
    assert dev.total_memory("cpu") > 2**20 and "CPU" in dev.device_name("cpu")
    dev.synchronize("cpu")
    dev.free_cache("cpu")
