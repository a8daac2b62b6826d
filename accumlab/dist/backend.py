"""Which backend and device each rank uses, chosen from the hardware and stated (lesson 07).

Measured facts this follows: NCCL refuses two ranks on one GPU ("Duplicate GPU detected"), gloo on
CUDA tensors works for DDP with several ranks on one GPU, and FSDP2 with gloo on CUDA tensors hung,
so FSDP then runs on CPU tensors with an explicit CPU device mesh.
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
    gpu_count: int
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
) -> Plan:
    """Pick the backend for `world_size` ranks on this machine (or one with `gpu_count` GPUs).

    `ranks_per_node` (default: all ranks on this machine) is what torchrun calls the local world size.

    - no GPU (or device="cpu"): gloo on CPU tensors, DDP and FSDP alike;
    - one rank per GPU available (world_size <= GPUs): NCCL, rank r on cuda:r;
    - more ranks than GPUs: gloo on CUDA tensors for DDP (NCCL refuses two ranks on one GPU),
      FSDP on CPU tensors (FSDP2 with gloo on CUDA tensors hung when tried).
    """
    positive_int("world_size", world_size)
    local = positive_int(
        "ranks_per_node", ranks_per_node if ranks_per_node is not None else world_size
    )
    one_of("device", device, DEVICES)
    if gpu_count is None:
        import torch

        gpu_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if isinstance(gpu_count, bool) or not isinstance(gpu_count, int) or gpu_count < 0:
        raise ValueError(f"gpu_count must be a non-negative integer, got {gpu_count!r}")
    if device == "cpu" or gpu_count == 0:
        why = "CPU asked for" if device == "cpu" and gpu_count else "no GPU found"
        return Plan(
            world_size,
            "gloo",
            "cpu",
            "cpu",
            gpu_count,
            f"{why}: CPU processes with gloo for DDP and FSDP (explicit CPU device mesh)",
        )
    if local <= gpu_count:
        return Plan(
            world_size,
            "nccl",
            "cuda",
            "cuda",
            gpu_count,
            f"{gpu_count} GPU(s): NCCL, one rank per GPU",
        )
    return Plan(
        world_size,
        "gloo",
        "cuda",
        "cpu",
        gpu_count,
        f"{local} ranks on {gpu_count} GPU(s): gloo on CUDA tensors for DDP (NCCL refuses "
        "two ranks on one GPU); FSDP on CPU tensors with gloo (FSDP2 with gloo on CUDA hung)",
    )
