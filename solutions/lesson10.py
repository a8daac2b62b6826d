"""Solutions to lesson 10's exercises (and one wrong answer each, which the checker must reject)."""


def resume_position(step, batches_per_epoch, k):
    # the per-epoch counter takes ⌊batches / k⌋ steps per epoch, each after k micro-batches of
    # that epoch; step number `step` is the ((step - 1) mod that) + 1-th of its epoch, and the
    # epoch's leftover micro-batches come after it
    if step == 0:
        return 0
    per_epoch = batches_per_epoch // k
    epochs, before = divmod(step - 1, per_epoch)
    return epochs * batches_per_epoch + (before + 1) * k


def resume_position_step_times_k(step, batches_per_epoch, k):
    return step * k


SOLUTIONS = {
    "10.1": (96, 90),  # ⌈250 / 8⌉ × 3 and 240 / 8 × 3: k = 8 divides 240, no short window
    "10.2": (16, 31, 46),  # ⌊250 / 16⌋ = 15 steps per epoch: each next epoch's first carries 10
    "10.3": resume_position,
}

WRONG = {
    "10.1": (93, 90),  # ⌊250 / 8⌋ × 3: the short window that ends every epoch forgotten
    "10.2": (16, 32, 47),  # a counter over the whole run (`global`): every window holds k
    "10.3": resume_position_step_times_k,
}
