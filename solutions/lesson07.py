"""Solutions to lesson 07's exercises (and a wrong answer for each, which the checker must reject)."""

import math


def token_divisor(local_tokens, global_tokens, world_size):
    return global_tokens / world_size  # DDP averages over ranks, so undo the division by ranks


def fsdp_grad_bytes(shapes, world_size, element_size):
    # FSDP2 shards dim 0, padded so every rank holds ceil(rows / ranks) rows
    sharded = sum(math.ceil(s[0] / world_size) * math.prod(s[1:]) for s in shapes) * element_size
    full = sum(math.prod(s) for s in shapes) * element_size
    return sharded, full


SOLUTIONS = {
    "07.1": (8, 1),
    "07.2": "BC",
    "07.3": token_divisor,
    "07.4": fsdp_grad_bytes,
}

WRONG = {
    "07.1": (8, 8),
    "07.2": "AB",
    "07.3": lambda local_tokens, global_tokens, world_size: local_tokens,
    "07.4": lambda shapes, world_size, element_size: (
        sum(math.prod(s) for s in shapes) * element_size // world_size,
        sum(math.prod(s) for s in shapes) * element_size,
    ),
}
