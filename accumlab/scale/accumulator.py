"""Which dtype does accumulation happen in? The real `.grad` of a bfloat16 model against a float32
main gradient kept by a post-accumulate-grad hook, and float32 parameters under bfloat16 autocast,
each measured against a float64 reference (lesson 12).

Lesson 06 summed precomputed gradient rows in a loop; here autograd itself does the adding: a
bfloat16 parameter gets a bfloat16 `.grad`, and every `backward()` rounds the running sum to 8
significant bits. The fix large-model trainers use (Megatron-LM's `main_grad`, DeepSpeed's fp32
gradient accumulation) keeps a float32 copy that each micro-batch's gradient is added into.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import _validate
from .._threads import one_thread
from .._validate import one_of, positive_int
from ..losses import get_loss
from ..run_inputs import forward

# name -> what holds the running sum
ACCUMULATORS = {
    "bfloat16 .grad": "bfloat16 parameters: autograd adds every micro-batch into a bfloat16 .grad",
    "float32 main_grad": "bfloat16 parameters: a post-accumulate-grad hook adds each .grad into a "
    "float32 buffer and frees .grad",
    "float32 grad_dtype": "bfloat16 parameters with param.grad_dtype = torch.float32: autograd "
    "casts each gradient to float32 and adds it into a float32 .grad",
    "float32 params + autocast": "float32 parameters, bfloat16 autocast: .grad is float32",
}
MAX_K = 4096


def grad_dtype_supported() -> bool:
    """True when the installed torch has `Tensor.grad_dtype`. Without it, setting the attribute on
    a parameter would silently do nothing, so the accumulator is refused."""
    return hasattr(torch.Tensor, "grad_dtype")


def available_accumulators() -> tuple[str, ...]:
    """The accumulators the installed torch can run (all of ACCUMULATORS where it has
    `Tensor.grad_dtype`)."""
    return tuple(a for a in ACCUMULATORS if a != "float32 grad_dtype" or grad_dtype_supported())


def bf16_rounding(limit: int = 1 << 14) -> dict:
    """Where bfloat16 stops seeing `+ 1`: the first integer n with bf16(n) + 1 == n, and examples."""
    # float32 holds every integer exactly up to 2**24: beyond it the arange itself would round
    limit = positive_int(
        "limit", limit, minimum=2, maximum=2**24, why="float32 counts exactly to 2**24"
    )
    n = torch.arange(1, limit + 1, dtype=torch.float32).to(torch.bfloat16)
    lost = (n + 1) == n  # computed in bfloat16: the sum is rounded back to 8 significant bits
    first = int(n[lost][0]) if bool(lost.any()) else None
    one = torch.tensor(1.0, dtype=torch.bfloat16)

    def plus_one(x: float) -> float:
        return float(torch.tensor(x, dtype=torch.bfloat16) + one)

    eps = torch.finfo(torch.bfloat16).eps  # spacing just above 1.0
    return {
        "first_lost": first,
        "plus_one": {x: plus_one(x) for x in (255.0, 256.0, 4096.0)},
        "eps": eps,
        "significant_bits": 1
        - round(math.log2(eps)),  # the stored bits plus the implicit leading 1
    }


class MainGrad:
    """A float32 (or float64) gradient per parameter, filled by post-accumulate-grad hooks.

    After autograd has written a parameter's `.grad` for one backward, the hook adds it into
    `buffers[name]` and sets `.grad = None`, so the low-precision `.grad` never holds a running sum.
    `remove()` takes the hooks off. Lesson 12.
    """

    def __init__(self, model: nn.Module, dtype: torch.dtype = torch.float32):
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
        self.buffers = {
            n: torch.zeros_like(p, dtype=dtype)
            for n, p in model.named_parameters()
            if p.requires_grad
        }
        self._handles = [
            p.register_post_accumulate_grad_hook(self._hook(n))
            for n, p in model.named_parameters()
            if p.requires_grad
        ]

    def _hook(self, name: str):
        buffer = self.buffers[name]

        def add_and_free(param: torch.Tensor) -> None:
            buffer.add_(param.grad)  # upcast then add: rounded to float32, not to bfloat16
            param.grad = None  # the next backward starts a fresh .grad instead of adding into it

        return add_and_free

    @property
    def nbytes(self) -> int:
        return sum(b.nelement() * b.element_size() for b in self.buffers.values())

    def zero_(self) -> None:
        for b in self.buffers.values():
            b.zero_()

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []


def _bytes(tensors) -> int:
    return sum(t.nelement() * t.element_size() for t in tensors if t is not None)


def accumulate(model: nn.Module, micro_batches: list, accumulator: str) -> tuple[dict, dict]:
    """Accumulate `loss / k` over `micro_batches` (a list of `al.Data`) the way `accumulator` says.

    `model` is copied (bfloat16 parameters, or float32 for the autocast variant). Returns the
    accumulated gradient (name → float64 tensor) and the bytes held afterwards by parameters,
    `.grad` and any main-gradient buffer.
    """
    one_of("accumulator", accumulator, ACCUMULATORS)
    _validate.model("model", model)
    for i, mb in enumerate(_validate.sequence("micro_batches", micro_batches)):
        _validate.data(f"micro_batches[{i}]", mb)
    if accumulator not in available_accumulators():
        raise ValueError(
            f"accumulator {accumulator!r} needs Tensor.grad_dtype, which torch {torch.__version__} "
            "does not have"
        )
    if not micro_batches:
        raise ValueError("micro_batches must hold at least one micro-batch, got []")
    k = len(micro_batches)
    autocast = accumulator == "float32 params + autocast"
    model = copy.deepcopy(model).to(torch.float32 if autocast else torch.bfloat16)
    main = MainGrad(model) if accumulator == "float32 main_grad" else None
    if accumulator == "float32 grad_dtype":
        for p in model.parameters():
            p.grad_dtype = torch.float32  # the engine casts each incoming gradient to float32
    device = next(model.parameters()).device.type  # autocast on the device the model is on
    for mb in micro_batches:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            pred = forward(model, mb.x.to(next(model.parameters()).dtype), "a micro-batch")
        get_loss("mse").check(pred, mb.y)  # (n, 1) against (n,) would broadcast silently
        # the loss and its / k in float32: only the gradient buffers differ between accumulators
        (F.mse_loss(pred.float(), mb.y.float()) / k).backward()
    if main is not None:
        main.remove()
        grads = {n: b.double() for n, b in main.buffers.items()}
    else:
        grads = {n: p.grad.double() for n, p in model.named_parameters()}
    memory = {
        "params": _bytes(model.parameters()),
        "grad": _bytes(p.grad for p in model.parameters()),
        "main_grad": main.nbytes if main is not None else 0,
    }
    return grads, memory


def _relative_error(a: dict, b: dict) -> float:
    fa = torch.cat([a[n].reshape(-1) for n in sorted(b)])
    fb = torch.cat([b[n].reshape(-1) for n in sorted(b)])
    return float((fa - fb).norm() / fb.norm())


@one_thread()
def accumulator_errors(
    ks,
    accumulators=None,
    *,
    micro_batch_size: int = 4,
    features: int = 8,
    hidden: int = 32,
    seed: int = 0,
) -> dict:
    """Relative L2 error of each accumulator against float64, for k micro-batches, every k in `ks`.

    All runs start from the same bfloat16-representable weights, and the reference is the float64
    gradient of the mean loss at exactly those weights, so the error is rounding only: bfloat16
    arithmetic inside each backward plus whatever the accumulator adds. Returns
    {"ks", "errors": {name: [...]}, "bytes": {name: {...}}, "parameters": count}. Lesson 12.
    """
    from ..data import regression_data
    from ..models import mlp

    ks = _validate.positive_ints("ks", ks, maximum=MAX_K)
    accumulators = available_accumulators() if accumulators is None else accumulators
    for i, a in enumerate(_validate.sequence("accumulators", accumulators)):
        one_of(f"accumulators[{i}]", a, ACCUMULATORS)
    micro_batch_size = positive_int("micro_batch_size", micro_batch_size)
    _validate.fits_in_memory(
        f"MAX_K × micro_batch_size = {MAX_K} × {micro_batch_size} samples",
        MAX_K * micro_batch_size * (positive_int("features", features) + 1) * 8,
    )
    # round the weights to bfloat16 once: every accumulator and the reference see the same point
    base = mlp(features, hidden, depth=1, seed=seed).to(torch.bfloat16).double()
    # one data set of MAX_K micro-batches, drawn whatever ks is: each k reads its first k
    # micro-batches, so a point does not change when other ks are added to the sweep
    data = regression_data(n=MAX_K * micro_batch_size, features=features, seed=seed)
    errors: dict[str, list[float]] = {a: [] for a in accumulators}
    memory: dict[str, dict] = {}
    for k in ks:
        window = data[: k * micro_batch_size]
        reference = copy.deepcopy(base)
        F.mse_loss(reference(window.x), window.y).backward()
        exact = {n: p.grad for n, p in reference.named_parameters()}
        chunks = window.micro_batches(micro_batch_size)
        for a in accumulators:
            grads, memory[a] = accumulate(base, chunks, a)
            errors[a].append(_relative_error(grads, exact))
    return {
        "ks": ks,
        "errors": errors,
        "bytes": memory,
        "parameters": sum(p.numel() for p in base.parameters()),
    }


GRAD_DTYPE_OPTIMIZERS = {
    "SGD (for-loop)": lambda ps: torch.optim.SGD(ps, lr=0.1, foreach=False),
    "SGD (foreach)": lambda ps: torch.optim.SGD(ps, lr=0.1, foreach=True),
    "SGD (fused)": lambda ps: torch.optim.SGD(ps, lr=0.1, fused=True),
    "AdamW (for-loop)": lambda ps: torch.optim.AdamW(ps, lr=0.1, foreach=False),
    "AdamW (foreach)": lambda ps: torch.optim.AdamW(ps, lr=0.1, foreach=True),
    "AdamW (fused)": lambda ps: torch.optim.AdamW(ps, lr=0.1, fused=True),
}


def step_with_grad_dtype() -> dict[str, str]:
    """One optimizer step on bfloat16 parameters whose `.grad` autograd keeps in float32
    (`param.grad_dtype = torch.float32`), for each of GRAD_DTYPE_OPTIMIZERS: "steps" (every parameter moved),
    or the error the optimizer raised. Lesson 12: a float32 gradient is not a drop-in for an update that
    runs in the parameter's dtype (fused SGD's kernel, and AdamW's moments, which have the
    parameter's dtype and whose `lerp_` refuses a float32 gradient). Empty where this torch has no
    `Tensor.grad_dtype`."""
    if not grad_dtype_supported():
        return {}
    out = {}
    for name, make in GRAD_DTYPE_OPTIMIZERS.items():
        layer = nn.Linear(4, 2).to(torch.bfloat16)
        for p in layer.parameters():
            p.grad_dtype = torch.float32
        layer(torch.ones(3, 4, dtype=torch.bfloat16)).float().sum().backward()
        before = [p.detach().clone() for p in layer.parameters()]
        try:
            make(list(layer.parameters())).step()
        except RuntimeError as err:  # what the optimizer's kernel says about the mixed dtypes
            out[name] = f"{type(err).__name__}: {str(err).splitlines()[0]}"
        else:  # lr 0.1 on gradients of 3: every entry moves far more than its spacing
            moved = all(not torch.equal(b, p) for b, p in zip(before, layer.parameters()))
            out[name] = "steps" if moved else "returned without moving every parameter"
    return out
