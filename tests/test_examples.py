"""examples/accumulation_loop.py, the loop lesson 03 ends with: the lesson shows this very code, and
it gives the full-batch gradient per window — on a DataLoader of variable-length sequences with a
short last window, under al.audit (GradScaler, clipping, scheduler), and on two DDP ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from cuda_layer import SimulatedGpu
from example_ranks import LR, MICRO, SEQUENCES, K, load_loop, texts

import accumlab as al

ROOT = Path(__file__).resolve().parents[1]
LOOP_FILE = ROOT / "examples" / "accumulation_loop.py"
LESSON = ROOT / "notebooks" / "03_loss_scaling.ipynb"
EXACT = 1e-12


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """As al.setup() does in the lessons: tiny models run faster on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def loop():
    return load_loop()


def _body(text: str) -> str:
    """The file's code between its docstring and its `__main__` demo."""
    return text.split('"""\n', 1)[1].split('\n\nif __name__ == "__main__":')[0].strip("\n")


def test_the_lesson_runs_the_files_code_exactly():
    cells = json.loads(LESSON.read_text())["cells"]
    shown = [
        "".join(c["source"])
        for c in cells
        if c["cell_type"] == "code" and "def train_epoch" in "".join(c["source"])
    ]
    assert shown == [_body(LOOP_FILE.read_text())], "lesson 03's loop cell and the file differ"


def _epoch_vs_full_batch(loop, data, micro, k, *, epochs=1, shuffle_seed=None):
    """Train with the loop on a DataLoader; the reference takes one full-batch step per window."""
    sequences = al.scaling.unpadded(data)
    loader = torch.utils.data.DataLoader(sequences, batch_size=micro, collate_fn=loop.pad_batch)
    mine = al.TinyLM(vocab=16, dim=8, seed=0)
    optimizer = torch.optim.SGD(mine.parameters(), lr=LR)
    losses = [v for _ in range(epochs) for v in loop.train_epoch(mine, optimizer, loader, k)]
    big = al.run(
        al.Recipe(micro * k),
        al.TinyLM(vocab=16, dim=8, seed=0),
        data,
        loss="cross_entropy",
        optimizer="sgd",
        lr=LR,
        epochs=epochs,
    )
    return al.params_of(mine), losses, big


@pytest.mark.parametrize(
    "lengths, micro, k",
    [
        ([3, 9, 1, 14, 6, 2, 11, 5, 8, 4], 2, 3),  # windows of 3 and 2 micro-batches
        ([3, 9, 1, 14, 6, 2, 11, 5, 8, 4, 7], 2, 3),  # ...and a last micro-batch of 1 sequence
        ([16, 1, 1, 1, 12, 2, 5], 3, 2),  # very unequal micro-batches
        ([4] * 6, 2, 3),  # equal lengths: one window, no short one
    ],
)
def test_the_loop_is_one_full_batch_step_per_window(loop, lengths, micro, k):
    data = al.token_data(lengths=lengths, vocab=16, seed=0)
    params, losses, big = _epoch_vs_full_batch(loop, data, micro, k, epochs=2)
    assert al.grad_diff(params, big.params[-1]).max_rel <= EXACT
    assert losses == pytest.approx(big.window_losses, rel=EXACT)  # it logs the window's mean


def test_a_mean_per_micro_batch_would_fail_the_same_check(loop):
    """The check above can fail: the loop with `loss_sum / n_tokens` replaced by the mean of
    micro-batch means misses the full-batch step."""
    source = LOOP_FILE.read_text()
    line = "loss = loss_sum / n_tokens"
    assert source.count(line) == 1
    mutant = source.replace(line, "loss = loss_sum / int((y != PAD).sum()) / len(window)")
    namespace: dict = {"__name__": "mutant"}
    exec(compile(mutant, "mutant", "exec"), namespace)
    data = al.token_data(lengths=[3, 9, 1, 14, 6, 2, 11, 5, 8, 4], vocab=16, seed=0)
    params, _, big = _epoch_vs_full_batch(_Namespace(namespace), data, 2, 3)
    assert al.grad_diff(params, big.params[-1]).max_rel > 1e-3


class _Namespace:
    def __init__(self, names: dict):
        self.__dict__.update(names)


@pytest.mark.parametrize(
    "options",
    [{}, {"scheduler": True}, {"scaler": True, "max_norm": 5.0, "scheduler": True}],
)
def test_the_audit_finds_nothing(loop, options):
    report = al.audit(loop.train_epoch, **al.audit.audit_setup("tokens", **options))
    assert report.findings == [], report
    assert report.seen_steps == report.expected_steps
    assert all(c.rel_error <= 1e-9 for c in report.checks)


def test_the_audit_sees_clipping_bite_and_nothing_else(loop):
    report = al.audit(loop.train_epoch, **al.audit.audit_setup("tokens", max_norm=0.5))
    assert {f.code for f in report.findings} == {"GRADIENT_NOT_VERIFIED"}, report


BACKWARD = "                (scaler.scale(loss) if scaler is not None else loss).backward()\n"
CLIP = "            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # once, on the window\n"
SCHEDULE = "            scheduler.step()  # once per optimizer step, never per micro-batch\n"
MUTANTS = {  # a line of the loop changed as a learner might: (replace, by), audit options
    "mean of micro-batch means": (
        ("loss = loss_sum / n_tokens", "loss = loss_sum / int((y != PAD).sum()) / len(window)"),
        {},
    ),
    "divided by k as well": (("loss = loss_sum / n_tokens", "loss = loss_sum / n_tokens / k"), {}),
    "zeroed inside the window": (
        (
            "            x, y = x.to(device)",
            "            optimizer.zero_grad()\n            x, y = x.to(device)",
        ),
        {},
    ),
    "clipped after every backward": (
        (
            BACKWARD,
            BACKWARD + CLIP.replace("            ", "                "),
        ),
        {"max_norm": 0.5},
    ),
    "scheduler stepped per micro-batch": (
        (BACKWARD, BACKWARD + "                scheduler.step()\n"),
        {"scheduler": True},
    ),
}


@pytest.mark.parametrize("name", list(MUTANTS))
def test_the_audit_flags_each_changed_line(name):
    (old, new), options = MUTANTS[name]
    source = LOOP_FILE.read_text()
    assert source.count(old) == 1, f"{name}: the line to change is not in the loop"
    namespace: dict = {"__name__": "mutant"}
    exec(compile(source.replace(old, new), "mutant", "exec"), namespace)
    report = al.audit(namespace["train_epoch"], **al.audit.audit_setup("tokens", **options))
    assert {f.code for f in report.findings} - {"GRADIENT_NOT_VERIFIED"}, f"{name}: {report}"


# --- a skipped GradScaler step must hold the schedule back ---------------------------------------
OVERFLOW_LENGTHS = [3, 9, 1, 14, 6, 2, 11, 5, 8, 4]  # micro-batches of 2, k = 3: windows 0-5, 6-9
GUARD = "if scheduler is not None and stepped:"


def _epoch_with_overflow(loop, poisoned_backwards: int, *, device="cpu", dtype=torch.float64):
    """One epoch with a GradScaler and a LambdaLR (lr × 1/(1 + step)); the first
    `poisoned_backwards` backward passes write inf into one gradient, as an overflow would, so
    the scaler must skip every window they fall in. Returns the model, its start, the scheduler
    and the warnings torch gave."""
    data = al.token_data(lengths=OVERFLOW_LENGTHS, vocab=16, seed=0)
    loader = torch.utils.data.DataLoader(
        al.scaling.unpadded(data), batch_size=MICRO, collate_fn=loop.pad_batch
    )
    model = al.TinyLM(vocab=16, dim=8, seed=0, dtype=dtype).to(device)
    start = al.params_of(model)
    backwards = []

    def overflow(grad):
        backwards.append(1)
        return grad * float("inf") if len(backwards) <= poisoned_backwards else grad

    model.head.bias.register_hook(overflow)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (1 + step))
    scaler = torch.amp.GradScaler(device)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        loop.train_epoch(model, optimizer, loader, K, scaler=scaler, scheduler=scheduler)
    return model, start, scheduler, [str(w.message) for w in seen]


def test_an_overflow_in_every_window_moves_neither_the_weights_nor_the_schedule(loop):
    model, start, scheduler, said = _epoch_with_overflow(loop, poisoned_backwards=5)
    moved = al.grad_diff(al.params_of(model), start)
    assert moved.max_abs == 0.0  # both windows skipped by the scaler
    assert scheduler.last_epoch == 0  # and the schedule did not advance
    assert not [w for w in said if "lr_scheduler.step()" in w], said


def _after_a_skipped_first_window(loop):
    """Window 0 overflows; window 1 must be one full-batch step at the schedule's FIRST lr."""
    model, start, scheduler, _ = _epoch_with_overflow(loop, poisoned_backwards=K)
    data = al.token_data(lengths=OVERFLOW_LENGTHS, vocab=16, seed=0)
    window_1 = data[K * MICRO :]
    one_step = al.run(
        al.Recipe(len(window_1)),
        al.TinyLM(vocab=16, dim=8, seed=0),
        window_1,
        loss="cross_entropy",
        optimizer="sgd",
        lr=LR,  # × 1/(1 + 0): the schedule has not moved
    )
    return al.grad_diff(al.params_of(model), one_step.params[-1]), scheduler.last_epoch, start


def test_after_a_skipped_window_the_next_step_uses_the_schedules_first_lr(loop):
    gap, last_epoch, _ = _after_a_skipped_first_window(loop)
    assert gap.max_rel <= EXACT and last_epoch == 1


def test_a_scheduler_stepped_on_a_skipped_step_would_fail_the_same_check():
    """Without the guard the schedule advances on the skipped window: window 1 then steps at half
    the lr, and the check above fails."""
    source = LOOP_FILE.read_text()
    assert source.count(GUARD) == 1
    namespace: dict = {"__name__": "mutant"}
    exec(compile(source.replace(GUARD, "if scheduler is not None:"), "mutant", "exec"), namespace)
    mutant = _Namespace(namespace)
    gap, last_epoch, _ = _after_a_skipped_first_window(mutant)
    assert gap.max_rel > 1e-3 and last_epoch == 2
    *_, scheduler, said = _epoch_with_overflow(mutant, poisoned_backwards=5)
    assert scheduler.last_epoch == 2  # the schedule ran ahead of zero steps
    assert [w for w in said if "lr_scheduler.step()` before `optimizer.step()" in w], said


def test_the_loop_runs_on_a_simulated_gpu_with_a_cuda_grad_scaler(loop):
    """The CUDA code path (tensors moved to the device, the scaler's CUDA branch) runs, and a
    skipped step holds the schedule back there too (tests/cuda_layer: code paths, not numerics)."""
    with SimulatedGpu():
        model, start, scheduler, said = _epoch_with_overflow(
            loop, poisoned_backwards=K, device="cuda", dtype=torch.float32
        )
        on_device = next(model.parameters()).device.type
        moved = max(float((p - start[n]).abs().max()) for n, p in al.params_of(model).items())
    assert on_device == "cuda"
    assert scheduler.last_epoch == 1  # window 0 skipped, window 1 stepped
    assert moved > 0  # window 1's step happened
    assert not [w for w in said if "lr_scheduler.step()" in w], said


@pytest.mark.slow
def test_two_ddp_ranks_take_the_full_batch_step_with_one_allreduce_per_window(monkeypatch):
    """Each rank holds every other sequence; the step must be the full-batch step over both ranks'
    window, with DDP's gradient all-reduce once per window (no_sync) — and the same gradient, but
    one all-reduce per micro-batch, when no_sync is hidden from the loop."""
    paths = [str(ROOT / "tests"), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))  # the ranks import example_ranks
    data = texts()
    ranks = 2
    per_rank = SEQUENCES // ranks  # 10 sequences: 5 micro-batches, windows of 3 and 2
    order = []  # the global windows, contiguous: rank 0's part, then rank 1's
    for start, stop in ((0, K * MICRO), (K * MICRO, per_rank)):
        for r in range(ranks):
            order += [r + ranks * i for i in range(start, stop)]
    big = al.run(
        al.Recipe(ranks * K * MICRO),
        al.TinyLM(vocab=16, dim=8, seed=0),
        data[torch.tensor(order)],
        loss="cross_entropy",
        optimizer="sgd",
        lr=LR,
    )
    assert len(big.window_losses) == 2
    results = al.dist.launch("example_ranks:ddp_epoch", ranks, timeout=180)
    for variant, calls in (("no_sync", 2), ("hidden", 5)):
        for result in (r[variant] for r in results):
            assert al.grad_diff(result["params"], big.params[-1]).max_rel <= EXACT
            assert result["allreduces"] == calls  # one bucket per backward that syncs
        means = [sum(r[variant]["losses"][w] for r in results) / ranks for w in range(2)]
        assert means == pytest.approx(big.window_losses, rel=EXACT)


@pytest.mark.slow
def test_the_file_runs_as_a_script():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # a tiny model: one thread is faster
    out = subprocess.run(
        [sys.executable, str(LOOP_FILE)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env=env,
    )
    lines = out.stdout.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["epoch 0", "epoch 1", "epoch 2"]
    assert all(line.count("'") == 6 for line in lines)  # three optimizer steps per epoch


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sixteen_bit_logits_are_summed_in_float32(loop, dtype):
    """A 16-bit model's logits: the loop casts them to float32 before the summed loss, so the
    logged window loss keeps float32's digits (a 16-bit sum would round it to 3 or 4 digits)."""
    lengths = [40, 37, 33, 29, 40, 38, 35, 31, 26, 40, 39, 34]
    data = al.token_data(lengths=lengths, vocab=16, seed=0)
    loader = torch.utils.data.DataLoader(
        al.scaling.unpadded(data), batch_size=2, collate_fn=loop.pad_batch
    )
    model = al.TinyLM(vocab=16, dim=8, seed=0).to(dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # the model stays where it is
    losses = loop.train_epoch(model, optimizer, loader, 3)
    exact = []
    with torch.no_grad():  # float64 sums of the same 16-bit logits, one per window of 3 × 2
        for w in range(0, len(lengths), 6):
            x, y = loop.pad_batch(al.scaling.unpadded(data)[w : w + 6])
            logits = model(x).flatten(0, -2).double()
            total = torch.nn.functional.cross_entropy(
                logits, y.flatten(), ignore_index=-100, reduction="sum"
            )
            exact.append(float(total) / int((y != -100).sum()))
    assert losses == pytest.approx(exact, rel=1e-5)
