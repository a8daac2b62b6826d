"""Solutions to lesson 00's exercises (kept apart from the lesson)."""


def set_explorer():
    import accumlab as al

    explorer = al.accumulation.accumulation_explorer()
    explorer.controls["micro_batch_size"].value = 8  # first: it sets how large k may be
    explorer.controls["accumulation_steps"].value = 3
    explorer.controls["zero_grad"].value = "every_micro_step"
    return explorer


def default_explorer():
    import accumlab as al

    return al.accumulation.accumulation_explorer()  # 16 samples in 4 micro-batches


SOLUTIONS = {"00.1": 48, "00.2": set_explorer()}
WRONG = {"00.1": 24, "00.2": default_explorer()}
