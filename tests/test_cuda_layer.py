"""The simulated GPU of tests/cuda_layer keeps CUDA's memory semantics (this file checks the layer
against them), and with it every CUDA branch of accumlab's device code executes on a CPU: the
memory meter, capped runs, the cache, the memory probe, the backend plan and `al.setup()`."""

import gc

import pytest
import torch
from cuda_layer import SimulatedGpu
from cuda_layer.allocator import LARGE_BUFFER, MB, SMALL_BUFFER, round_size, segment_size

import accumlab as al
from accumlab import device as dev


@pytest.fixture
def simulated_gpu():
    with SimulatedGpu() as gpu:
        yield gpu


# ---------------------------------------------------------------- the layer: CUDA's semantics


def test_requests_round_to_512_bytes_inside_2_and_20_mib_segments(simulated_gpu):
    a = simulated_gpu.allocator
    x = torch.empty(1, dtype=torch.uint8, device="cuda")
    assert x.device == torch.device("cuda", 0) and x.is_cuda
    assert (torch.cuda.memory_allocated(), torch.cuda.memory_reserved()) == (512, SMALL_BUFFER)
    y = torch.empty(1000, dtype=torch.uint8, device="cuda")  # same small segment
    assert torch.cuda.memory_allocated() == 512 + 1024
    assert torch.cuda.memory_reserved() == SMALL_BUFFER
    big = torch.empty(3 * MB // 4, device="cuda")  # 3 MiB of float32: a 20 MiB large segment
    assert torch.cuda.memory_reserved() == SMALL_BUFFER + LARGE_BUFFER
    within = torch.empty(12 * MB // 4, device="cuda")  # 12 MiB: in the 17 MiB left of that one
    assert torch.cuda.memory_reserved() == SMALL_BUFFER + LARGE_BUFFER
    huge = torch.empty(24 * MB // 4, device="cuda")  # 24 MiB: a segment of its own size
    reserved = SMALL_BUFFER + LARGE_BUFFER + 24 * MB
    assert torch.cuda.memory_reserved() == reserved
    assert a.stats()["segment.all.current"] == 3
    del x, y, big, within, huge
    assert torch.cuda.memory_allocated() == 0  # freed ...
    assert torch.cuda.memory_reserved() == reserved  # ... but cached
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == 0
    assert [round_size(n) for n in (0, 1, 512, 513)] == [0, 512, 512, 1024]
    assert [segment_size(s) for s in (MB, MB + 512, 10 * MB)] == [2 * MB, 20 * MB, 10 * MB]


def test_cached_blocks_are_reused_and_a_live_block_keeps_its_segment(simulated_gpu):
    keep = torch.empty(256, device="cuda")  # 1 KiB
    gone = torch.empty(256 * 1024, device="cuda")  # 1 MiB, same small segment
    del gone
    again = torch.empty(128 * 1024, device="cuda")  # fits in the cached block: no new segment
    assert torch.cuda.memory_reserved() == SMALL_BUFFER
    del again
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == SMALL_BUFFER  # `keep` pins its segment
    del keep
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == 0


def test_peaks_reset_and_the_fraction_caps_reserved_memory_mid_block(simulated_gpu):
    x = torch.empty(MB // 4, device="cuda")
    del x
    assert torch.cuda.max_memory_allocated() == MB and torch.cuda.memory_allocated() == 0
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == 0
    assert torch.cuda.max_memory_reserved() == torch.cuda.memory_reserved() == SMALL_BUFFER
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction((SMALL_BUFFER + LARGE_BUFFER) / total)
    ran = []
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate 24.00 MiB"):
        a = torch.empty(3 * MB // 4, device="cuda")  # a 20 MiB segment: just fits
        ran.append("a")
        torch.empty(24 * MB // 4, device="cuda")  # a new 24 MiB segment: past the cap, raises
        ran.append("b")
    assert ran == ["a"]  # raised at the allocation, not after the block
    del a
    assert simulated_gpu.allocator.num_ooms == 1
    torch.cuda.set_per_process_memory_fraction(1.0)
    with pytest.raises(ValueError, match="invalid fraction"):
        torch.cuda.set_per_process_memory_fraction(1.5)


def test_moves_copy_and_mixing_devices_raises(simulated_gpu):
    model = al.mlp(4, 64, depth=2, dtype=torch.float32)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    cpu_weight = model[0].weight
    model.to("cuda")  # a copy: the parameters now take device memory
    assert all(p.device.type == "cuda" for p in model.parameters())
    assert nbytes <= torch.cuda.memory_allocated() <= nbytes + 512 * len(list(model.parameters()))
    assert not simulated_gpu.on_gpu(cpu_weight) or cpu_weight is model[0].weight
    w = model[0].weight
    assert w.to("cuda") is w and w.cuda() is w  # already there: the tensor itself
    back = w.to("cpu")
    assert back is not w and back.device.type == "cpu" and torch.equal(back, w.detach().cpu())
    before = torch.cuda.memory_allocated()
    w.to(torch.float64)  # a dtype change copies on the device
    assert torch.cuda.memory_allocated() == before  # (and the copy was freed at once)
    with pytest.raises(RuntimeError, match="same device"):
        model(torch.randn(8, 4))
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.zeros(1, device="cuda:1")


def test_backward_on_the_device_counts_gradients_and_activations(simulated_gpu):
    model = al.mlp(4, 64, depth=2, dtype=torch.float32).to("cuda")
    x = torch.randn(32, 4).to("cuda")
    resident = torch.cuda.memory_allocated()  # parameters and input
    loss = model(x).square().mean()
    assert torch.cuda.memory_allocated() > resident  # saved activations
    loss.backward()
    assert all(p.grad.device.type == "cuda" for p in model.parameters())
    del loss
    grads = sum(round_size(p.grad.untyped_storage().nbytes()) for p in model.parameters())
    assert torch.cuda.memory_allocated() == resident + grads  # activations freed by backward


def test_the_layer_leaves_no_trace():
    with SimulatedGpu():
        assert torch.cuda.is_available() and torch.cuda.device_count() == 1
        t = torch.zeros(3, device="cuda")
        assert t.device.type == "cuda"
    assert "device" not in torch.Tensor.__dict__
    assert t.device.type == "cpu"  # outside the layer, the bytes are where they always were
    if torch.version.cuda is None:  # a CPU-only torch, as in CI
        assert not torch.cuda.is_available() and torch.cuda.device_count() == 0


# ---------------------------------------------------------------- accumlab's CUDA branches


def test_meter_reads_the_allocator_and_counts_a_move_inside_it(simulated_gpu):
    model = al.mlp(4, 64, depth=2, dtype=torch.float32)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    early = torch.empty(1000, device="cuda")  # allocated before the meter: not counted
    with dev.MemoryMeter("cuda") as meter:
        model.to("cuda")  # inside the measured block: on a GPU this is an allocation
        moved = meter.now()
        x = torch.randn(64, 4, device="cuda")
        model(x).sum().backward()
        del x
    assert nbytes <= moved < nbytes + 4096
    assert meter.peak >= meter.now() >= moved
    assert meter.peak == torch.cuda.max_memory_allocated() - round_size(early.nbytes)
    _, peak = dev.measure_peak(lambda: torch.empty(MB // 4, device="cuda"), "cuda")
    assert (peak.peak, peak.end, peak.device) == (MB, MB, "cuda")  # the result is still alive


def test_run_capped_sets_the_fraction_raises_a_real_oom_and_restores_it(simulated_gpu):
    a = simulated_gpu.allocator
    stale = torch.empty(MB // 4, device="cuda")
    del stale  # a cached block: free_cache hands its segment back before the cap is set
    result, peak = dev.run_capped(lambda: torch.empty(MB // 4, device="cuda"), "cuda", 4 * MB)
    assert peak.peak == MB and a.fraction == 1.0
    del result
    fractions = []

    def too_big():
        fractions.append(a.fraction)
        return torch.empty(3 * MB // 4, device="cuda")  # needs a 20 MiB segment

    with pytest.raises(torch.OutOfMemoryError, match="CUDA out of memory") as err:
        dev.run_capped(too_big, "cuda", 4 * MB)
    assert getattr(err.value, "peak_bytes", None) is None  # a real OOM: the peak is unknown
    assert fractions == [pytest.approx(4 * MB / a.total_memory)]
    assert a.fraction == 1.0  # restored after the error
    dev.free_cache("cuda")
    assert torch.cuda.memory_reserved() == 0
    assert dev.total_memory("cuda") == a.total_memory
    assert "Simulated GPU" in dev.device_name("cuda")
    assert dev.as_device("cuda") == torch.device("cuda")


def test_the_probe_chooses_on_the_device_and_restores_the_model(simulated_gpu):
    model, data = al.memory.memory_setup(width=64, depth=2, global_batch=256, device="cuda")
    # the model on the device, the data in host memory (each micro-batch is copied over)
    assert next(model.parameters()).device.type == "cuda" and data.x.device.type == "cpu"
    weights = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    resident = torch.cuda.memory_allocated()
    per_sample = al.memory.activation_bytes(model, data[:1]) + al.memory.data_bytes(data[:1])
    budget = al.memory.floor_bytes(model, "adam") + 40 * per_sample
    probe = al.memory.choose_micro_batch(model, data, budget, method="probe")
    estimate = al.memory.choose_micro_batch(model, data, budget, method="estimate")
    measured = dict(zip((m for m, _ in probe.tried), probe.needed, strict=True))
    m = probe.micro_batch_size
    assert 1 < probe.accumulation_steps and m * probe.accumulation_steps == 256
    assert measured[m] <= budget and all(measured[c] > budget for c in measured if c > m)
    assert m <= estimate.micro_batch_size  # the estimate cannot see backward's temporaries
    assert all(torch.equal(v.cpu(), weights[k]) for k, v in model.state_dict().items())
    assert simulated_gpu.allocator.fraction == 1.0
    assert torch.cuda.memory_allocated() >= resident


def test_measuring_activations_leaves_no_device_memory_behind(simulated_gpu):
    # saved-tensor hooks that return the saved tensor itself make a saved OUTPUT (tanh's result)
    # hold its own grad_fn: a cycle through C++ that kept every measured forward's activations
    model, data = al.memory.memory_setup(width=64, depth=2, global_batch=256, device="cuda")
    resident = torch.cuda.memory_allocated()
    assert al.memory.activation_bytes(model, data) > 0
    al.memory.logging_growth(model, data, 64, log="item", backward=False)
    gc.collect()
    assert torch.cuda.memory_allocated() == resident


def test_setup_and_the_backend_plan_see_the_gpu(simulated_gpu):
    env = al.setup()
    assert (env.gpu_count, env.device.type, env.standin) == (1, "cuda", False)
    assert "Simulated GPU" in env.gpu_name
    plan = al.dist.choose_plan(2)
    assert (plan.backend, plan.ddp_device(1), plan.fsdp_device(1)) == ("gloo", "cuda:0", "cpu")
    one = al.dist.choose_plan(1)
    assert (one.backend, one.ddp_device(0)) == ("nccl", "cuda:0")
    from accumlab.dist.backend import gpu_identity

    assert gpu_identity(0).endswith("GPU-00000000-simulated")


def test_the_generic_accelerator_queries_answer_as_the_simulated_device(simulated_gpu):
    """torch.accelerator answers from the C++ build. An optimizer's step asks it for the current
    stream (its CUDA-graph health check) whenever torch was built with CUDA: without the layer's
    answers that query reaches the CUDA runtime on a CUDA build of torch with no driver, and
    raises on a CPU build. Either way a step on the simulated device must run."""
    assert torch.accelerator.current_stream().is_capturing() is False
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.synchronize()
    w = torch.zeros(3, device="cuda", requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.1)
    (w - 1).pow(2).sum().backward()
    opt.step()
    assert simulated_gpu.on_gpu(w) and float(w.detach().cpu().sum()) > 0


def test_run_capped_keeps_a_cap_the_caller_set(simulated_gpu):
    a = simulated_gpu.allocator
    torch.cuda.set_per_process_memory_fraction(0.5)
    seen = []
    dev.run_capped(lambda: seen.append(a.fraction), "cuda", a.total_memory)  # asks for it all
    assert seen == [0.5] and a.fraction == 0.5  # never above the caller's cap, which is put back
    torch.cuda.set_per_process_memory_fraction(1.0)


def test_a_meter_restarts_its_peak_from_what_is_allocated(simulated_gpu):
    with dev.MemoryMeter("cuda") as meter:
        big = torch.empty(MB, device="cuda")
        del big
        kept = torch.empty(MB // 4, device="cuda")
        assert meter.peak >= 4 * MB // 4 * 4 > meter.now()
        meter.restart_peak()
        assert meter.peak == meter.now()  # the high point starts again here
    del kept
