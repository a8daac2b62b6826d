"""DDP's bucket memory on a (simulated) GPU: the measurement lesson 07 reports must count DDP's
buckets and gradients, never the parameters. On the CPU `model.to("cpu")` is a no-op, so a move
inside the measured block is invisible there; on a GPU it is an allocation. The layer in
tests/cuda_layer makes it one here too, with DDP itself running (one gloo rank, in this process).
"""

import pytest
import torch.distributed as dist
from cuda_layer import SimulatedGpu
from cuda_layer.workspaces import FirstMatmulWorkspace

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
    from accumlab.dist.buckets import bucket_memory
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
    found = checks({"k": 1, "ddp_buckets": buckets})
    assert found["DDP buckets: a second copy of the gradients, unless gradient_as_bucket_view"]
    # the no_sync windows on the same allocator: fresh .grad tensors beside the buckets unless
    # the views survive zero_grad (set_to_none=False), from the second window on
    window = [k for k in found if k.startswith("DDP buckets under no_sync")]
    assert window and found[window[0]], buckets["window"]
    # the high point per window: the kept views hold no fresh .grad from the second window on
    high = [k for k in found if k.startswith("DDP buckets' high point")]
    assert high and found[high[0]], buckets["window_peak"]


def test_bucket_memory_warms_up_before_its_meter(one_rank, monkeypatch):
    """Run alone (`python -m accumlab.dist --parts buckets`), the first meter of bucket_memory
    would see cuBLAS's workspaces (8 MiB each, its default) as copies of the gradients; the
    warm-up before the meter keeps them out. Without it the lesson's check fails."""
    from accumlab.dist import buckets as buckets_module
    from accumlab.dist.backend import choose_plan
    from accumlab.dist.report import bucket_checks
    from accumlab.dist.worker import Context

    def measured():
        gpu = SimulatedGpu()
        # entered first, so that the layer's own modes see every call before it does
        with FirstMatmulWorkspace(gpu, 8 << 20) as workspaces, gpu:
            ctx = Context(rank=0, world_size=1, local_rank=0, plan=choose_plan(1))
            out = buckets_module.bucket_memory(ctx)
            assert len(workspaces.blocks) == 2  # the forward's and the backward's
        return out

    name = "DDP buckets: a second copy of the gradients, unless gradient_as_bucket_view"
    assert bucket_checks(measured())[name]
    monkeypatch.setattr(buckets_module, "_warm_up", lambda *args: None)  # no warm-up
    cold = measured()
    assert not bucket_checks(cold)[name]  # the workspaces landed in the first reading
    assert cold["gradient_as_bucket_view"]["false"]["after_backward"] > 16 << 20


def _gpu_context():
    """A one-rank Context with the plan of ranks sharing one GPU (the lesson on Colab): gloo on
    CUDA tensors for DDP, FSDP on the CPU. (One GPU per rank means NCCL, absent here.)"""
    from accumlab.dist.backend import choose_plan
    from accumlab.dist.worker import Context

    return Context(rank=0, world_size=1, local_rank=0, plan=choose_plan(2, gpu_count=1))


def test_the_ddp_experiments_run_on_a_gpu(one_rank):
    """Every lesson-07 function that puts tensors on the GPU, run on the simulated one: it must
    place them there (device moves copy, mixing devices raises) and count what a GPU counts."""
    from accumlab.dist import ddp, tokens, uneven
    from accumlab.dist.clipping import ddp_norms
    from accumlab.dist.references import DDP_MODEL, PITFALL, TOKENS, UNEVEN

    with SimulatedGpu() as gpu:
        ctx = _gpu_context()
        assert ctx.ddp_device == "cuda:0" and ctx.fsdp_device == "cpu"
        modes = ddp.sync_modes(ctx, k=3, micro_batch=4, **DDP_MODEL)
        assert modes["every"]["per_backward"] == [1, 1, 1]  # the comm hook saw CUDA buckets
        assert modes["no_sync"]["per_backward"] == [0, 0, 1]
        assert all(g.device.type == "cpu" for g in modes["every"]["grads"].values())  # copied back
        rows = ddp.sweep(ctx, ks=(1, 2), micro_batches=(8,), repeats=1)
        assert [r["allreduce_calls"] for r in rows] == [1, 1, 2, 1]
        assert ddp.pitfall(ctx, **PITFALL)["manual_allreduce"]["calls"] == 1
        tok = tokens.token_normalisation(ctx, **TOKENS)
        assert tok["global_tokens"] == tok["local_tokens"]  # one rank holds every token
        # alone, the rank with the extra micro-batch has nobody to wait for
        un = uneven.uneven_inputs(ctx, **UNEVEN)
        assert un["plain"]["finished"] and un["join"]["allreduce_calls"] == 3
        norms = ddp_norms(ctx, k=3, micro_batch=4, seed=0, **DDP_MODEL)
        assert norms["after_sync"] > 0
        assert gpu.allocator.peak_allocated > 0  # all of this allocated on the (simulated) GPU


def test_the_fsdp_experiments_run_beside_a_gpu(one_rank):
    """With ranks sharing a GPU, FSDP2 runs on CPU tensors with an explicit CPU mesh."""
    from accumlab.dist import fsdp, hsdp
    from accumlab.dist.references import FSDP_MODEL

    with SimulatedGpu():
        ctx = _gpu_context()
        out = fsdp.fsdp_accumulation(ctx, k=2, micro_batch=4, **FSDP_MODEL)
        assert out["sync_each"]["counted"] and out["reduce_ops"] == []  # 1 rank: no reduce-scatter
        assert hsdp.hsdp_accumulation(ctx, k=2, micro_batch=4, **FSDP_MODEL)["mesh"] == [1, 1]
