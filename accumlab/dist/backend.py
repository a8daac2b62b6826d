"""Which backend and device each rank uses, chosen from the hardware and stated (lesson 07).

Where each rule comes from (none of it was measured by this project's own recorder yet):
- NCCL needs one GPU per rank: two ranks on one GPU fail with "Duplicate GPU detected" (NCCL's
  own error, e.g. NVIDIA/nccl#1241, NVIDIA/Megatron-LM#661);
- gloo on CUDA tensors is documented for broadcast and all_reduce only (the backend table of
  the torch.distributed documentation): enough for DDP; FSDP2's all-gather and reduce-scatter
  then run on CPU tensors with an explicit CPU device mesh.
The GPU identities (`gpu_ids`) matter under torchrun: a launcher that gives every process ONE
visible GPU makes each rank see `device_count() == 1` although the ranks use different GPUs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .._validate import one_of, positive_int

DEVICES = ("auto", "cpu")


@dataclass(frozen=True)
class Plan:
    """Backend and devices for one launched group: `ddp_device(rank)` / `fsdp_device(rank)`."""

    world_size: int
    backend: str  # "gloo" or "nccl"
    ddp_device_type: str  # "cpu" or "cuda"
    fsdp_device_type: str  # "cpu" or "cuda"
    gpu_count: int  # GPUs each process sees
    reason: str

    def ddp_device(self, local_rank: int) -> str:
        if self.ddp_device_type == "cpu":
            return "cpu"
        return f"cuda:{local_rank % self.gpu_count}"

    def fsdp_device(self, local_rank: int) -> str:
        if self.fsdp_device_type == "cpu":
            return "cpu"
        return f"cuda:{local_rank % self.gpu_count}"

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.world_size} rank(s), backend {self.backend}: {self.reason}"


def choose_plan(
    world_size: int,
    gpu_count: int | None = None,
    *,
    device: str = "auto",
    ranks_per_node: int | None = None,
    gpu_ids: list[str] | None = None,
) -> Plan:
    """Pick the backend for `world_size` ranks on this machine (or one with `gpu_count` GPUs
    visible to each process). `ranks_per_node` (default: all ranks on this machine) is torchrun's
    local world size; `gpu_ids` the identity of the GPU each rank of this node would use, when the
    ranks compared them (see `gpu_identity`).

    - no GPU (or device="cpu"): gloo on CPU tensors, DDP and FSDP alike;
    - one GPU per rank (distinct `gpu_ids`, or ranks_per_node <= gpu_count): NCCL;
    - ranks sharing a GPU: gloo on CUDA tensors for DDP, FSDP on CPU tensors.
    """
    from .launcher import check_world_size, max_world_size

    positive_int("world_size", world_size)
    local = positive_int(
        "ranks_per_node", ranks_per_node if ranks_per_node is not None else world_size
    )
    if local > world_size:
        raise ValueError(
            f"ranks_per_node must be at most world_size ({world_size}), got {ranks_per_node!r}"
        )
    one_of("device", device, DEVICES)
    here = gpu_count is None  # a plan for the ranks this machine starts, not a described one
    if here:
        import torch

        # the same bound as al.dist.launch: more ranks than that cannot run on this machine
        if ranks_per_node is None:
            check_world_size(world_size)
        else:
            _local_ranks_here(local)
        gpu_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if isinstance(gpu_count, bool) or not isinstance(gpu_count, int) or gpu_count < 0:
        raise ValueError(f"gpu_count must be a non-negative integer, got {gpu_count!r}")
    plan = _choose(world_size, local, gpu_count, device, gpu_ids)
    if not here and local > max_world_size():
        note = (
            f"; a plan for a machine with {gpu_count} GPU(s) and {local} ranks on it: this "
            f"machine starts at most {max_world_size()} (al.dist.launch refuses more)"
        )
        plan = Plan(**{**plan.as_dict(), "reason": plan.reason + note})
    return plan


def _local_ranks_here(local: int) -> None:
    from .launcher import check_world_size

    try:
        check_world_size(local)
    except ValueError as err:
        raise ValueError(str(err).replace("world_size", "ranks_per_node", 1)) from None


def _choose(world_size, local, gpu_count, device, gpu_ids) -> Plan:
    if gpu_ids is not None and (isinstance(gpu_ids, (str, bytes)) or len(gpu_ids) != local):
        raise ValueError(
            f"gpu_ids must list one GPU per rank on this node ({local}), got {gpu_ids!r}"
        )
    if device == "cpu" or gpu_count == 0:
        why = "CPU asked for" if device == "cpu" and gpu_count else "no GPU found"
        return Plan(
            world_size, "gloo", "cpu", "cpu", gpu_count,
            f"{why}: CPU processes with gloo for DDP and FSDP (FSDP2 is given a CPU device mesh: "
            "left to itself it builds a CUDA one whenever a GPU is usable)",
        )  # fmt: skip
    own_gpu = len(set(gpu_ids)) == local if gpu_ids is not None else local <= gpu_count
    if own_gpu:
        how = (
            "compared GPU identities: every rank has its own GPU"
            if gpu_ids is not None
            else f"{gpu_count} GPU(s) visible"
        )
        return Plan(world_size, "nccl", "cuda", "cuda", gpu_count, f"{how}: NCCL, one rank per GPU")
    return Plan(
        world_size, "gloo", "cuda", "cpu", gpu_count,
        f"{local} ranks share {len(set(gpu_ids)) if gpu_ids else gpu_count} GPU(s): gloo on CUDA "
        "tensors for DDP (NCCL refuses two ranks on one GPU); FSDP on CPU tensors with gloo "
        "(gloo's CUDA support is documented for broadcast and all_reduce only)",
    )  # fmt: skip


def timing_note(plan: dict) -> str:
    """What step times measured under `plan` (a `Plan.as_dict()`) can and cannot say."""
    if plan["backend"] == "nccl":
        return "NCCL, one GPU per rank"
    if plan["ddp_device_type"] == "cuda":
        # ProcessGroupGloo's AsyncAllreduceCUDAWork: copy to pinned host memory, all-reduce on
        # the CPU, copy back
        return (
            "gloo on CUDA tensors of ranks sharing one GPU: each all-reduce copies the gradients "
            "to host memory and back; says nothing about NCCL or its overlap with backward"
        )
    return "gloo on CPU processes sharing this machine's cores with their own backward"


def gpu_identity(local_rank: int) -> str | None:
    """Host and UUID of the GPU rank `local_rank` would use here (None without a GPU)."""
    import socket

    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return None
    index = local_rank % torch.cuda.device_count()
    return f"{socket.gethostname()}/{torch.cuda.get_device_properties(index).uuid}"
