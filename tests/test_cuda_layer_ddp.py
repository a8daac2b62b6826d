"""DDP's bucket memory on a (simulated) GPU: the measurement lesson 07 reports must count DDP's
buckets and gradients, never the parameters. On the CPU `model.to("cpu")` is a no-op, so a move
inside the measured block is invisible there; on a GPU it is an allocation. The layer in
tests/cuda_layer makes it one here too, with DDP itself running (one gloo rank, in this process).
"""

import pytest
import torch.distributed as dist
from cuda_layer import SimulatedGpu

from accumlab.device import MemoryMeter


@pytest.fixture
def one_rank():
    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_a_move_inside_the_meter_counts_the_parameters_on_a_gpu_only():
    from accumlab.dist.ddp import timing_model

    nbytes = sum(p.numel() * p.element_size() for p in timing_model().parameters())
    moved = {}
    for where in ("cpu", "cuda"):
        with SimulatedGpu() if where == "cuda" else MemoryMeter("cpu"):
            model = timing_model()
            with MemoryMeter(where) as meter:
                model.to(where)
            moved[where] = meter.peak
    assert moved["cpu"] == 0  # a no-op on the CPU: nothing to see
    assert nbytes <= moved["cuda"] < nbytes + 512 * len(list(model.parameters()))


def test_bucket_memory_passes_the_lessons_check_on_a_gpu(one_rank):
    from accumlab.dist.backend import choose_plan
    from accumlab.dist.ddp import bucket_memory
    from accumlab.dist.report import checks
    from accumlab.dist.worker import Context

    with SimulatedGpu():
        ctx = Context(rank=0, world_size=1, local_rank=0, plan=choose_plan(1))
        assert ctx.ddp_device == "cuda:0"
        buckets = bucket_memory(ctx)
    g, view = buckets["grad_bytes"], buckets["gradient_as_bucket_view"]
    # the buckets are one copy of the gradients (rounded to 512-byte blocks): the parameters
    # were on the device before the measured block, so they must not be in it
    for v in ("false", "true"):
        assert g <= view[v]["after_wrap"] < 1.01 * g, (v, view[v], g)
    name = "DDP buckets: a second copy of the gradients, unless gradient_as_bucket_view"
    assert checks({"k": 1, "ddp_buckets": buckets})[name], buckets
