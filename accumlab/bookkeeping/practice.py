"""What stock tools do with the bookkeeping of lesson 10, measured with the tools themselves: where
the installed Accelerate syncs across epochs (with and without a prepared loader), and what a stock
PyTorch DataLoader loop needs to resume mid-epoch (its shuffle is drawn from the global RNG).
Introduced in lesson 10."""

from __future__ import annotations

import torch

from .. import _validate
from .._threads import one_thread
from .._validate import MAX_STEPS, one_of, positive_int
from ..models import MAX_DEPTH

# how the stock loop's checkpoint restores the global RNG (lesson 10):
#   none             — not at all: the resumed run draws from wherever the new process starts
#   at_checkpoint    — the state saved at the interruption, restored before iter(loader)
#   epoch_then_ckpt  — the state saved when this epoch's iter(loader) drew its shuffle, restored
#                      before iter(loader); then, after skipping what was read, the state saved
#                      at the interruption (what the Transformers Trainer does after
#                      skip_first_batches with its rng_state.pth)
RNG_RESTORES = ("none", "at_checkpoint", "epoch_then_ckpt")


def accelerate_sync_points(
    batches_per_epoch: int = 7, accumulation_steps: int = 4, epochs: int = 2, *, prepared: bool
) -> list[int]:
    """Run `epochs` epochs of a DataLoader of `batches_per_epoch` batches under the installed
    Accelerate's `accumulate()` with `gradient_accumulation_steps=accumulation_steps`; the loader
    goes through `accelerator.prepare` when `prepared`. Returns the micro-steps (0-based, counted
    over the whole run) after which `accelerator.sync_gradients` was True. Lesson 10."""
    b = positive_int("batches_per_epoch", batches_per_epoch)
    k = positive_int("accumulation_steps", accumulation_steps)
    e = positive_int("epochs", epochs)
    _validate.within_max_steps("batches_per_epoch × epochs", b * e)
    _validate.flag("prepared", prepared)
    from accelerate import Accelerator  # here: importing Accelerate takes seconds
    from torch.utils.data import DataLoader, TensorDataset

    accelerator = Accelerator(gradient_accumulation_steps=k, cpu=True)
    accelerator.sync_gradients = True  # the state is process-wide: start as a new process would
    model = torch.nn.Linear(1, 1)
    loader = DataLoader(TensorDataset(torch.zeros(b, 1)), batch_size=1)
    model = accelerator.prepare(model)
    if prepared:
        loader = accelerator.prepare(loader)
    synced, g = [], 0
    with one_thread():
        for _ in range(e):
            for _batch in loader:
                with accelerator.accumulate(model):
                    if accelerator.sync_gradients:
                        synced.append(g)
                g += 1
    accelerator.sync_gradients = True
    return synced


def _stock_run(model, data, epochs, batch_size, stop_at=None, start=None):
    """A stock loop: DataLoader(shuffle=True) — its RandomSampler has no generator, so each
    iter(loader) draws a seed from the global RNG — a model with dropout, SGD, one step per batch.
    Returns (model, reads, checkpoint at `stop_at` batches or None)."""
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.arange(len(data))), batch_size=batch_size, shuffle=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    reads, g = [], 0
    first_epoch, skip = (0, 0) if start is None else (start["epoch"], start["in_epoch"])
    if start is not None:
        model.load_state_dict(start["model"])
        opt.load_state_dict(start["optimizer"])
    for epoch in range(first_epoch, epochs):
        if start is not None and epoch == first_epoch and start["restore"] == "epoch_then_ckpt":
            torch.set_rng_state(start["rng_epoch"])
        epoch_rng = torch.get_rng_state()  # what this epoch's shuffle is drawn from
        it = iter(loader)
        done = 0
        if start is not None and epoch == first_epoch:
            for _ in range(skip):  # the batches read before the interruption
                next(it)
            done = skip
            if start["restore"] == "epoch_then_ckpt":
                torch.set_rng_state(start["rng_ckpt"])  # dropout goes on where it stopped
        for i, (idx,) in enumerate(it, start=done):
            if stop_at is not None and g == stop_at:
                return (
                    model,
                    reads,
                    {
                        "epoch": epoch,
                        "in_epoch": i,
                        "model": {n: t.clone() for n, t in model.state_dict().items()},
                        "optimizer": opt.state_dict(),
                        "rng_ckpt": torch.get_rng_state(),
                        "rng_epoch": epoch_rng,
                    },
                )
            loss = torch.nn.functional.mse_loss(model(data.x[idx]), data.y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            reads.append(idx)
            g += 1
    return model, reads, None


@one_thread()
def stock_loader_resume(
    restore: str, *, batches_per_epoch: int = 8, epochs: int = 2, stop_at: int = 11, seed: int = 0
) -> dict:
    """Interrupt a stock PyTorch loop (DataLoader with shuffle=True and no generator, dropout, SGD)
    after `stop_at` batches, resume it in the same process after the global RNG has moved on, with
    the checkpoint's RNG restored as `restore` says (RNG_RESTORES), skipping the batches already
    read, and compare with the uninterrupted run. Returns {"bit_exact", "rel_error" (final
    weights), "extra_reads", "missed_reads" (against one read per sample per epoch)}. Lesson 10."""
    one_of("restore", restore, RNG_RESTORES)
    b = positive_int("batches_per_epoch", batches_per_epoch, maximum=MAX_STEPS)
    e = positive_int("epochs", epochs, maximum=MAX_STEPS // b, why="each batch is a real step")
    stop_at = positive_int("stop_at", stop_at, maximum=b * e - 1)
    seed = _validate.seed("seed", seed)
    from ..compare import grad_diff
    from ..data import regression_data
    from ..models import mlp

    data = regression_data(4 * b, 4, seed=seed)

    def fresh():
        return mlp(4, 8, 1, dropout=0.2, seed=seed)

    with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
        torch.manual_seed(seed)
        reference, ref_reads, _ = _stock_run(fresh(), data, e, 4)
        torch.manual_seed(seed)
        _, first_reads, ckpt = _stock_run(fresh(), data, e, 4, stop_at=stop_at)
        torch.manual_seed(seed + 1)  # a new process: the global RNG is somewhere else
        if restore == "at_checkpoint":
            torch.set_rng_state(ckpt["rng_ckpt"])
        resumed, rest_reads, _ = _stock_run(fresh(), data, e, 4, start={**ckpt, "restore": restore})
    counts = torch.bincount(torch.cat(first_reads + rest_reads), minlength=len(data)) - e
    ref = dict(reference.named_parameters())
    got = dict(resumed.named_parameters())
    return {
        "bit_exact": all(torch.equal(got[n], ref[n]) for n in ref),
        "rel_error": grad_diff(
            {n: p.detach() for n, p in got.items()}, {n: p.detach() for n, p in ref.items()}
        ).rel_l2,
        "extra_reads": int(counts.clamp(min=0).sum()),
        "missed_reads": int((-counts).clamp(min=0).sum()),
    }


def dropout_masks_split_alike(
    rows: int = 4,
    parts: int = 2,
    features: int = 8,
    p: float = 0.1,
    seed: int = 0,
    *,
    layers: int = 1,
) -> bool:
    """Does a forward pass of (rows, features) through `layers` dropout layers draw the same masks
    as `parts` forward passes of (rows / parts, features) one after the other, from the same CPU
    generator state? With one layer, True when this build's CPU dropout kernel draws element by
    element in row-major order: then halving the micro-batch while doubling k keeps every
    sample's dropout mask. With two or more the draws interleave (layer 1, layer 2 of the first
    part, then of the second), so the masks differ whatever the kernel. A property of the kernel
    and of the model (a kernel that draws one seed per call, or CUDA's, which advances its offset
    per launch, need not have it), not of accumulation. Lesson 10."""
    parts = positive_int("parts", parts)
    rows = positive_int("rows", rows, maximum=MAX_STEPS)
    features = positive_int("features", features, maximum=MAX_STEPS)
    if rows % parts:
        raise ValueError(f"parts must divide rows={rows}, got {parts}")
    p = _validate.fraction("p", p)
    seed = _validate.seed("seed", seed)
    layers = positive_int("layers", layers, maximum=MAX_DEPTH)
    ones = torch.ones(rows, features, dtype=torch.float64)

    def forward(batch):  # one mask per layer, drawn in the order the layers run
        return [torch.nn.functional.dropout(batch, p) for _ in range(layers)]

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        whole = forward(ones)
        torch.manual_seed(seed)
        pieces = [forward(ones[: rows // parts]) for _ in range(parts)]
    return all(
        torch.equal(whole[i], torch.cat([piece[i] for piece in pieces])) for i in range(layers)
    )


def cpu_description() -> str:
    """The CPU this process runs on and what torch uses of it: vendor and model (from
    /proc/cpuinfo where there is one), torch's CPU capability, whether MKL is built in. The
    dropout kernel that `dropout_masks_split_alike` probes depends on these. Lesson 10."""
    import platform

    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("vendor_id", "model name") and key not in info:
                    info[key] = value.strip()
    except OSError:  # not Linux: the platform's own name
        pass
    vendor = info.get("vendor_id") or platform.processor() or "unknown vendor"
    model = info.get("model name") or platform.machine() or "unknown model"
    capability = torch.backends.cpu.get_cpu_capability()
    mkl = "with" if torch.backends.mkl.is_available() else "without"
    return f"{vendor} {model}, torch {torch.__version__} ({capability}, {mkl} MKL)"
