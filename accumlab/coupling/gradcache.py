"""GradCache (Gao et al., 2021): the big batch's contrastive gradient at micro-batch memory, and
why its second forward must replay the first forward's random state (lesson 09).

Follows luyug/GradCache's `GradCache.cache_step`: (1) embed every micro-batch without a graph,
recording the RNG state before each; (2) compute the full-batch loss on the detached embeddings and
backpropagate it to them — the cached gradients; (3) for each micro-batch, forward again with a
graph (replaying its RNG state) and backpropagate the cached gradient through it (the gradient
of the dot product of the embeddings with their cached gradient). The RNG state saved and
replayed is the CPU generator's and, as GradCache's `RandContext` does (torch.utils.checkpoint's
`get_device_states` / `set_device_states`), the generator of every accelerator the micro-batch's
inputs are on: dropout on a GPU draws from the GPU's generator.

A loss-function parameter (open_clip's learnable `logit_scale`, see `encoder`) gets its gradient in
step (2), once, as in the big batch. open_clip's loop evaluates the whole loss k times and gives it
k times that (`cached_negatives_grads`).
"""

from __future__ import annotations

import copy
from contextlib import contextmanager

import torch
from torch import nn
from torch.utils.checkpoint import get_device_states, set_device_states

from .. import _validate
from .._threads import one_thread
from .._validate import positive_float
from ..data import Data
from ..engine import grads_of
from ..models import seeded
from ..saved import LiveSavedTensors, saved_tensor_bytes
from ._checks import require_bool, require_data, require_model, require_seed
from .contrastive import TEMPERATURE, info_nce, logit_scale_of, pair_inputs


def _split(reps: list[torch.Tensor], chunks: list[Data]):
    """Per-micro-batch [anchors; positives] embeddings → all anchors, all positives."""
    q = torch.cat([z[: len(c)] for z, c in zip(reps, chunks, strict=True)])
    k = torch.cat([z[len(c) :] for z, c in zip(reps, chunks, strict=True)])
    return q, k


def _rng_state(inputs: torch.Tensor) -> tuple:
    """What a forward of `inputs` may draw from: the CPU generator, and the generator of the
    accelerator `inputs` live on (none for CPU inputs)."""
    devices, states = get_device_states(inputs)
    device_type = inputs.device.type if devices else "cuda"  # no device: the type is unused
    return torch.get_rng_state(), devices, states, device_type


@contextmanager
def _replayed(saved: tuple):
    """Run the block from the RNG states `_rng_state` saved, then put every generator back: the
    same dropout masks as the forward that followed the save."""
    cpu, devices, states, device_type = saved
    with torch.random.fork_rng(devices=devices, device_type=device_type):
        torch.set_rng_state(cpu)
        set_device_states(devices, states, device_type=device_type)
        yield


def _start(model: nn.Module, data: Data, micro_batch_size: int, temperature, seed):
    require_model(model)
    require_data(data)
    temperature = positive_float("temperature", temperature)
    seed = require_seed(seed)
    chunks = data.micro_batches(micro_batch_size)  # validates micro_batch_size
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    return model, chunks


@one_thread()
def gradcache_grads(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    temperature: float = TEMPERATURE,
    replay_rng: bool = True,
    seed: int = 0,
) -> dict:
    """One GradCache step on a copy of `model`; the CPU generator (and, once CUDA runs, every
    CUDA generator) starts from `seed`, and the caller's generators are left as they were.

    Returns {"grads", "loss", "buffers", "first", "second", "same_embeddings",
    "peak_saved_bytes", "saved_bytes"}: the accumulated gradient, the full-batch loss, the model's
    buffers after the step (BatchNorm's running statistics and counter), the embeddings of the
    graph-less first pass and of the second pass, whether they are equal bit for bit per
    micro-batch (only when the RNG is replayed or there is no randomness), the most bytes autograd
    held for backward at any moment, and per phase {"loss": bytes the loss graph saved,
    "second_pass": the most bytes alive during pass 2} — bytes saved for backward, not a device's
    memory (pass 1's similarity matrix, the cached embeddings and their gradients are not in
    them). Lesson 09.
    """
    require_bool(replay_rng, "replay_rng")
    model, chunks = _start(model, data, micro_batch_size, temperature, seed)
    with seeded(seed), LiveSavedTensors(exclude=model.parameters()) as live:
        states, first = [], []
        with torch.no_grad():  # pass 1: embeddings only, no graph kept
            for c in chunks:
                inputs = pair_inputs(c)
                states.append(_rng_state(inputs))  # what dropout will draw from
                first.append(model(inputs))
        q, k = (t.detach().requires_grad_() for t in _split(first, chunks))
        # the big batch's loss: every negative is present; a learnable temperature gets its
        # whole gradient here, once
        loss = info_nce(q, k, temperature, logit_scale=logit_scale_of(model))
        loss_graph = live.bytes  # pass 1 kept no graph: all that is saved now is the loss's
        loss.backward()  # the cache: d loss / d embedding, one row per sample
        before, live.peak = live.peak, live.bytes  # from here on: the peak of pass 2 alone
        sizes = [len(c) for c in chunks]
        cached = list(zip(q.grad.split(sizes), k.grad.split(sizes), strict=True))
        second = []
        for c, state, (gq, gk) in zip(chunks, states, cached, strict=True):
            if replay_rng:
                with _replayed(state):  # the same dropout masks as in pass 1
                    z = model(pair_inputs(c))
            else:
                z = model(pair_inputs(c))  # fresh masks: not the embeddings the cache belongs to
            # backpropagating the cached rows through z is d/dθ of <z, cached gradient>: this
            # micro-batch's share of d loss / dθ (chain rule). GradCache writes it as the dot
            # product's backward; this form saves nothing beyond the encoder's graph
            z.backward(torch.cat([gq, gk]))
            second.append(z.detach())
        second_pass, live.peak = live.peak, max(before, live.peak)
    return {
        "grads": grads_of(model),
        "loss": float(loss.detach()),
        # running statistics a norm layer updated: every forward counts, pass 1's included
        "buffers": {n: b.detach().clone() for n, b in model.named_buffers()},
        "first": first,
        "second": second,
        "same_embeddings": [torch.equal(a, b) for a, b in zip(first, second, strict=True)],
        "peak_saved_bytes": live.peak,
        "saved_bytes": {"loss": loss_graph, "second_pass": second_pass},
    }


@one_thread()
def same_masks_reference(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    temperature: float = TEMPERATURE,
    seed: int = 0,
) -> dict:
    """The big batch with GradCache's dropout masks: the same chunks forwarded from the same RNG
    state WITH a graph, then one loss and one backward over all of them. The gradient GradCache
    must reproduce when dropout is on (with dropout off it is the plain big batch). Lesson 09."""
    model, chunks = _start(model, data, micro_batch_size, temperature, seed)
    with seeded(seed), LiveSavedTensors(exclude=model.parameters()) as live:
        reps = [model(pair_inputs(c)) for c in chunks]
        loss = info_nce(*_split(reps, chunks), temperature, logit_scale=logit_scale_of(model))
        loss.backward()
    return {"grads": grads_of(model), "loss": float(loss.detach()), "peak_saved_bytes": live.peak}


@one_thread()
def cached_negatives_grads(
    model: nn.Module,
    data: Data,
    micro_batch_size: int,
    *,
    temperature: float = TEMPERATURE,
    replay_rng: bool = False,
    temperature_once: bool = False,
    divide_loss: bool = False,
    seed: int = 0,
) -> dict:
    """open_clip's `--accum-freq` scheme (`_train_step_eager` in open_clip_train/train.py): cache
    every micro-batch's embeddings without a graph, then for each micro-batch recompute its own
    embeddings with a graph, put them among the cached ones, evaluate the full-batch loss and
    backpropagate. The gradient reaches only the recomputed rows, so the k backward passes add up
    to the big batch's gradient (k loss evaluations instead of GradCache's one).

    open_clip saves no RNG state between the two forwards (`replay_rng=False`, the default): with
    dropout the recomputed embeddings are not the cached ones. `replay_rng=True` restores each
    micro-batch's state first, as GradCache does.

    A learnable temperature (`encoder(learnable_temperature=True)`) is not a recomputed row: it
    enters all k loss evaluations with a graph, as open_clip's `logit_scale` does, and gets k
    times the big batch's gradient. `temperature_once=True` detaches it in all but the last
    evaluation, which gives it the big batch's gradient. `divide_loss=True` divides each
    evaluation's loss by k before its backward (the change open_clip #761 and #957 discuss).
    Returns {"grads", "peak_saved_bytes"}. Lesson 09.
    """
    require_bool(replay_rng, "replay_rng")
    require_bool(temperature_once, "temperature_once")
    require_bool(divide_loss, "divide_loss")
    model, chunks = _start(model, data, micro_batch_size, temperature, seed)
    with seeded(seed), LiveSavedTensors(exclude=model.parameters()) as live:
        states, cache = [], []
        with torch.no_grad():
            for c in chunks:
                inputs = pair_inputs(c)
                states.append(_rng_state(inputs))
                cache.append(model(inputs))
        for j, c in enumerate(chunks):
            if replay_rng:
                with _replayed(states[j]):
                    z = model(pair_inputs(c))
            else:
                z = model(pair_inputs(c))
            reps = [*cache[:j], z, *cache[j + 1 :]]
            scale = logit_scale_of(model)
            if scale is not None and temperature_once and j < len(chunks) - 1:
                scale = scale.detach()  # its gradient comes from one evaluation only
            loss = info_nce(*_split(reps, chunks), temperature, logit_scale=scale)
            (loss / len(chunks) if divide_loss else loss).backward()
    return {"grads": grads_of(model), "peak_saved_bytes": live.peak}


def encoder_saved_bytes(model: nn.Module, batch: Data) -> int:
    """Bytes autograd saves for one forward of the encoder over `batch` (anchors and positives),
    not counting the parameters: what a micro-batch's graph costs. Lesson 09."""
    require_model(model)
    require_data(batch, "batch")
    return saved_tensor_bytes(lambda: model(pair_inputs(batch)), exclude=model.parameters())


def logit_scale_ratio(grads: dict, reference: dict) -> dict:
    """A gradient with a learnable `logit_scale` against the big batch's: {"logit_scale": its
    gradient ÷ the reference's, "weights": ‖every other gradient‖ ÷ the reference's, "weights_rel":
    the relative L2 gap of those others}. Lesson 09."""
    from ..compare import grad_diff
    from .contrastive import LOGIT_SCALE

    for name, value in (("grads", grads), ("reference", reference)):
        _validate.tensor_dict(name, value)
        if LOGIT_SCALE not in value:
            raise ValueError(
                f"{name} must hold a {LOGIT_SCALE!r} gradient (al.coupling.encoder("
                f"learnable_temperature=True)), got the keys {sorted(value)}"
            )
    if set(grads) != set(reference):
        raise ValueError(
            f"grads and reference must name the same parameters, got {sorted(grads)} and {sorted(reference)}"
        )
    ref = float(reference[LOGIT_SCALE])
    if ref == 0:
        raise ValueError(f"reference[{LOGIT_SCALE!r}] is 0: no ratio to it")
    others = [n for n in reference if n != LOGIT_SCALE]
    mine, theirs = ({n: g[n] for n in others} for g in (grads, reference))
    norm = sum(float(t.double().pow(2).sum()) for t in theirs.values()) ** 0.5
    return {
        "logit_scale": float(grads[LOGIT_SCALE]) / ref,
        "weights": sum(float(t.double().pow(2).sum()) for t in mine.values()) ** 0.5 / norm,
        "weights_rel": grad_diff(mine, theirs).rel_l2,
    }
