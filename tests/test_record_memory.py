"""Lesson 05's recorder, run in-process on the CPU at its small sizes: every relation the lesson
draws from a recorded file holds, and the lesson's plots read it."""

import pytest

import accumlab as al
from accumlab.figures import figure_png
from accumlab.memory import record as recorder


@pytest.fixture(scope="module")
def res():
    return recorder.record(device="cpu", size="small")


@pytest.mark.slow
def test_memory_relations(res):
    mem = res["memory"]
    acts = mem["activations"]
    assert acts == sorted(acts, reverse=True) and acts[0] == 16 * acts[-1]  # 256 → 16 samples
    assert all(p >= e for p, e in zip(mem["peak"], mem["estimate"], strict=True))
    assert mem["peak"][0] > mem["peak"][-1]
    t = res["transient"]
    assert t["per_parameter"] < t["foreach"] <= t["params"]
    assert [r["name"] for r in res["checkpointing"]["rows"]] == [
        "plain",
        "checkpointing",
        "accumulation",
        "both",
    ]


@pytest.mark.slow
def test_probe_and_estimate_choices(res):
    probe, estimate = res["choice"], res["estimate_choice"]
    for c in (probe, estimate):
        assert c["micro_batch_size"] * c["accumulation_steps"] == res["memory"]["global_batch"]
    assert probe["method"] == "probe" and estimate["method"] == "estimate"
    assert probe["micro_batch_size"] <= estimate["micro_batch_size"]
    # the budget leaves room for a fifth of the batch: accumulation is needed (k > 1)
    assert estimate["accumulation_steps"] > 1 and probe["accumulation_steps"] > 1


def test_the_full_budget_forces_accumulation_by_its_own_numbers():
    # the GPU size, by arithmetic (a CPU cannot run it in a test): the forward of the whole batch
    # needs the data and activations of 4096 samples, the budget holds the floor plus 800 of them
    full = recorder.SIZES["full"]
    assert full["budget_samples"] * 5 <= full["global_batch"]
    # with k > 1, a micro-batch of m fits the estimate when m samples fit in the step's temporaries
    # (about one copy of the parameters) plus the room for budget_samples: well below the batch
    width, depth = full["width"], full["depth"]
    params = 4 * (depth * (width * width + width) + width + 1)
    per_sample = 4 * (2 * width * (depth + 1) + 2 * width)  # saved in and out of each layer, data
    assert full["budget_samples"] + params / per_sample < full["global_batch"] / 2


@pytest.mark.slow
def test_the_allocator_section_on_the_cpu_has_no_reserved_bytes(res):
    alloc = res["allocator"]
    assert alloc["micro_sizes"] == [256, 16]
    assert alloc["reserved"] == [None, None] and alloc["allocated"][0] > alloc["allocated"][1] > 0


@pytest.mark.slow
def test_the_lesson_plots_read_recorded_results(res):
    for fig in (
        al.memory.plot_memory_vs_k(res["memory"]),
        al.memory.plot_step_time(res["step_time"]),
        al.memory.plot_checkpointing(res["checkpointing"]),
    ):
        assert figure_png(fig).startswith(b"\x89PNG")


def test_unknown_size_is_a_clear_error():
    with pytest.raises(ValueError, match="size"):
        recorder.record("cpu", "huge")
