"""Solutions to lesson 07's exercises (and a wrong answer for each, which the checker must reject)."""

import math


def token_divisor(local_tokens, global_tokens, world_size, k):
    # DDP averages the ranks (÷ world_size) and the backward divides by k: undo both
    return global_tokens / (world_size * k)


def fsdp_grad_bytes(shapes, world_size, element_size):
    # FSDP2 shards dim 0, padded so every rank holds ceil(rows / ranks) rows
    sharded = sum(math.ceil(s[0] / world_size) * math.prod(s[1:]) for s in shapes) * element_size
    full = sum(math.prod(s) for s in shapes) * element_size
    return sharded, full


SOLUTIONS = {
    "07.1": (18, 3, 18),
    "07.2": "ACD",
    "07.3": token_divisor,
    "07.4": fsdp_grad_bytes,
}

WRONG = {
    "07.1": (6, 1, 6),  # backward passes that sync, not all-reduce calls
    "07.2": "AC",  # D looks like the section-1 mistake, but its forward is inside no_sync()
    # section 3's divisor, forgetting that this backward divides by k as well
    "07.3": lambda local_tokens, global_tokens, world_size, k: global_tokens / world_size,
    "07.4": lambda shapes, world_size, element_size: (
        sum(math.prod(s) for s in shapes) * element_size // world_size,
        sum(math.prod(s) for s in shapes) * element_size,
    ),
}
