"""Lesson 02: right, wrong and unanswered answers for its exercises (see __init__.py)."""

from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F

import accumlab as al

# ---- 02.2: accumulate(model, data, micro_batch_size) leaves the summed loss's full-batch
# gradient in .grad; .grad arrives holding another batch's gradient


def _hand_written_sum(model, data, micro_batch_size):
    model.zero_grad(set_to_none=False)
    for mb in data.micro_batches(micro_batch_size):
        ((model(mb.x) - mb.y) ** 2).sum().backward()


def _mean_times_size(model, data, micro_batch_size):
    for p in model.parameters():
        p.grad = None
    for mb in data.micro_batches(micro_batch_size):
        (F.mse_loss(model(mb.x), mb.y) * len(mb)).backward()


def _scaled_after(model, data, micro_batch_size):
    """Mean losses, then .grad multiplied by the micro-batch size once the loop is done."""
    model.zero_grad()
    for mb in data.micro_batches(micro_batch_size):
        F.mse_loss(model(mb.x), mb.y).backward()
    for p in model.parameters():
        p.grad *= micro_batch_size


def _one_full_batch(model, data, micro_batch_size):  # skips the technique
    model.zero_grad()
    F.mse_loss(model(data.x), data.y, reduction="sum").backward()


def _copies_the_reference(model, data, micro_batch_size):  # calls the package
    reference = al.full_batch_grads(model, data)
    for name, p in model.named_parameters():
        p.grad = reference[name] * len(data)


def _copies_the_accumulated(model, data, micro_batch_size):  # calls the package
    reference = al.accumulated_grads(model, data, micro_batch_size)
    for name, p in model.named_parameters():
        p.grad = reference[name] * len(data)


def _summed_then_one_backward(model, data, micro_batch_size):  # lesson 01's shortcut
    model.zero_grad()
    parts = data.micro_batches(micro_batch_size)
    sum(F.mse_loss(model(mb.x), mb.y, reduction="sum") for mb in parts).backward()


def _zero_grad_inside(model, data, micro_batch_size):  # section 4's bug
    for mb in data.micro_batches(micro_batch_size):
        model.zero_grad()
        F.mse_loss(model(mb.x), mb.y, reduction="sum").backward()


def _never_zeroes(model, data, micro_batch_size):
    for mb in data.micro_batches(micro_batch_size):
        F.mse_loss(model(mb.x), mb.y, reduction="sum").backward()


def _lessons_mean_loop(model, data, micro_batch_size):  # section 3's loop, copied
    model.zero_grad()
    parts = data.micro_batches(micro_batch_size)
    for mb in parts:
        (F.mse_loss(model(mb.x), mb.y) / len(parts)).backward()


def _sum_divided_by_k(model, data, micro_batch_size):  # the mean loop's ÷ k, carried over
    model.zero_grad()
    parts = data.micro_batches(micro_batch_size)
    for mb in parts:
        (F.mse_loss(model(mb.x), mb.y, reduction="sum") / len(parts)).backward()


def _autograd_grad_full_batch(model, data, micro_batch_size):
    params = list(model.parameters())
    loss = F.mse_loss(model(data.x), data.y, reduction="sum")
    for p, g in zip(params, torch.autograd.grad(loss, params)):
        p.grad = g


def _one_sample_at_a_time(model, data, micro_batch_size):
    model.zero_grad()
    for mb in data.micro_batches(1):
        F.mse_loss(model(mb.x), mb.y, reduction="sum").backward()


def _layers_by_hand(model, data):
    """The full batch through each layer's forward() (no module hook sees it)."""
    h = data.x
    for layer in model:
        h = layer.forward(h)
    return F.mse_loss(h, data.y, reduction="sum")


def _decoys(model, data, micro_batch_size, gradient):
    """Micro-batch forwards whose backward adds gradient ÷ k, not the micro-batch's own."""
    parts = data.micro_batches(micro_batch_size)
    for mb in parts:
        out = model(mb.x)
        (sum((p * g).sum() for p, g in zip(model.parameters(), gradient)) / len(parts)
         + 0 * out.sum()).backward()  # fmt: skip


def _hidden_full_batch_autograd(model, data, micro_batch_size):
    """One full-batch forward by hand, torch.autograd.grad, then decoy micro-batch backwards."""
    model.zero_grad()
    params = list(model.parameters())
    gradient = [g.detach() for g in torch.autograd.grad(_layers_by_hand(model, data), params)]
    _decoys(model, data, micro_batch_size, gradient)


def _hidden_full_batch_twin(model, data, micro_batch_size):
    """A twin's full-batch backward by hand (no hook, no autograd.grad), then decoys."""
    twin = al.mlp(3, 4, 1, depth=1)
    twin.load_state_dict(model.state_dict())
    _layers_by_hand(twin, data).backward()
    model.zero_grad()
    _decoys(model, data, micro_batch_size, [q.grad for q in twin.parameters()])


def _stub_accumulate(model, data, micro_batch_size): ...  # the lesson's cell


# ---- 02.3: EveryKth(optimizer, k)


class _CountsInZeroGrad:
    def __init__(self, optimizer, k):
        self.optimizer, self.k, self.seen = optimizer, k, 0

    def step(self):
        if (self.seen + 1) % self.k == 0:
            self.optimizer.step()

    def zero_grad(self):
        self.seen += 1
        if self.seen % self.k == 0:
            self.optimizer.zero_grad(set_to_none=True)


def _closure(optimizer, k):
    count = {"micro_batches": 0}

    def step():
        count["micro_batches"] += 1
        if count["micro_batches"] % k == 0:
            optimizer.step()
            optimizer.zero_grad()

    return SimpleNamespace(step=step, zero_grad=lambda: None)


class _KeepsBoundMethods:
    def __init__(self, optimizer, k):
        self._step, self._zero, self.k, self.n = optimizer.step, optimizer.zero_grad, k, 0

    def step(self):
        self.n += 1
        if self.n % self.k == 0:
            self._step()

    def zero_grad(self):
        if self.n % self.k == 0:
            self._zero()


class _NeverZeroes:
    def __init__(self, optimizer, k):
        self.optimizer, self.k, self.n = optimizer, k, 0

    def step(self):
        self.n += 1
        if self.n % self.k == 0:
            self.optimizer.step()

    def zero_grad(self):
        pass


class _ZeroesEveryTime(_NeverZeroes):
    def zero_grad(self):
        self.optimizer.zero_grad()


class _OffByOne:
    def __init__(self, optimizer, k):
        self.optimizer, self.k, self.n = optimizer, k, 0

    def step(self):
        if self.n % self.k == 0:
            self.optimizer.step()
        self.n += 1

    def zero_grad(self):
        if self.n % self.k == 1:
            self.optimizer.zero_grad()


class _HardCodedFour:
    """Right for the k = 4 the lesson's loop shows, and for no other k."""

    def __init__(self, optimizer, k):
        self.optimizer, self.n = optimizer, 0

    def step(self):
        self.n += 1
        if self.n % 4 == 0:
            self.optimizer.step()

    def zero_grad(self):
        if self.n % 4 == 0:
            self.optimizer.zero_grad()


class _StubWrapper:  # the lesson's cell
    def __init__(self, optimizer, k): ...

    def step(self): ...

    def zero_grad(self): ...


RIGHT = {
    "02.1": [
        ("computed in float32", float(torch.tensor(1.0) - 0.01 * torch.tensor(-40.0))),
        ("a 0-d tensor", torch.tensor(1.4)),
        ("a numpy float32", np.float32(1.4)),
        ("a fraction", Fraction(7, 5)),
        ("3 significant digits", 1.40),
    ],
    "02.2": [
        ("squared errors summed by hand, zero-filled .grad", _hand_written_sum),
        ("mean loss × micro-batch size, .grad set to None", _mean_times_size),
        ("mean losses, .grad scaled after the loop", _scaled_after),
    ],
    "02.3": [
        ("the count kept in zero_grad()", _CountsInZeroGrad),
        ("a function returning a namespace", _closure),
        ("the optimizer's bound methods kept", _KeepsBoundMethods),
    ],
}

WRONG = {
    "02.1": [
        ("w.grad instead of w", -40.0),
        ("the wrong sign", 0.6),
        ("w unchanged", np.float64(1.0)),
    ],
    "02.2": [
        ("one full-batch forward and backward: skips the technique", _one_full_batch),
        ("al.full_batch_grads copied into .grad: calls the package", _copies_the_reference),
        ("al.accumulated_grads copied into .grad: calls the package", _copies_the_accumulated),
        ("losses summed, one backward", _summed_then_one_backward),
        ("zero_grad() inside the loop", _zero_grad_inside),
        ("never zeroes the gradient it arrived with", _never_zeroes),
        ("each sum divided by k", _sum_divided_by_k),
        ("the lesson's mean-loss loop, each mean ÷ k", _lessons_mean_loop),
        ("torch.autograd.grad on the full batch", _autograd_grad_full_batch),
        ("one sample per micro-batch", _one_sample_at_a_time),
        ("a hidden full-batch autograd.grad, decoy backwards", _hidden_full_batch_autograd),
        ("a twin's hidden full-batch backward, decoy backwards", _hidden_full_batch_twin),
    ],
    "02.3": [
        ("never zeroes", _NeverZeroes),
        ("zeroes on every call", _ZeroesEveryTime),
        ("steps one micro-batch early", _OffByOne),
        ("k ignored, 4 hard-coded", _HardCodedFour),
    ],
}

STUBS = {
    "02.1": [("the cell's None", None)],
    "02.2": [("the cell's function", _stub_accumulate)],
    "02.3": [("the cell's class", _StubWrapper)],
}


# answers that pass the row count without accumulating (review of the 02.2 checker)
def _reshaped_full_batch(model, data, size):
    """One forward of all 12 samples shaped (4, 3, features), then zero-loss passes."""
    model.zero_grad()
    n = len(data.x)
    out = model(data.x.reshape(size, n // size, -1))
    F.mse_loss(out, data.y.reshape(size, n // size, -1), reduction="sum").backward()
    for mb in data.micro_batches(size)[1:]:
        (0 * model(mb.x).sum()).backward()


def _fresh_twin_copied(model, data, size):
    """A twin loaded with model's weights takes one full-batch backward; copied into .grad."""
    twin = al.mlp(3, 4, 1, depth=1)
    twin.load_state_dict(model.state_dict())
    F.mse_loss(twin(data.x), data.y, reduction="sum").backward()
    for mb in data.micro_batches(size):
        (0 * model(mb.x).sum()).backward()
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        p.grad = q.grad.clone()


def _full_batch_prebound(model, data, size):
    """accumlab's reference bound to another name before the check (no forward of its own)."""
    full = _PREBOUND_FULL_BATCH(model, data)
    for mb in data.micro_batches(size):
        (0 * model(mb.x).sum()).backward()
    for name, p in model.named_parameters():
        p.grad = full[name] * len(data)


def _logged_after(model, data, size):
    """Right: the loop, then the full-batch loss logged without a graph."""
    model.zero_grad()
    for mb in data.micro_batches(size):
        F.mse_loss(model(mb.x), mb.y, reduction="sum").backward()
    with torch.no_grad():
        F.mse_loss(model(data.x), data.y)


def _logged_first(model, data, size):
    """Right: the full-batch loss logged without a graph first, then the loop in reverse order."""
    with torch.no_grad():
        F.mse_loss(model(data.x), data.y)
    model.zero_grad()
    for mb in reversed(data.micro_batches(size)):
        F.mse_loss(model(mb.x), mb.y, reduction="sum").backward()


from accumlab.reference import full_batch_grads as _PREBOUND_FULL_BATCH  # noqa: E402

RIGHT["02.2"] += [
    ("a no-grad logging forward after the loop", _logged_after),
    ("a no-grad logging forward first, micro-batches in reverse", _logged_first),
]
WRONG["02.2"] += [
    ("the full batch reshaped to 4 rows, zero-loss passes", _reshaped_full_batch),
    ("a fresh twin's full-batch gradient copied into .grad", _fresh_twin_copied),
    ("al.full_batch_grads bound before the check", _full_batch_prebound),
]
# the hint a wrong answer must get: the mistake named (tests/test_exercises.py)
HINTS = {
    "w unchanged": "w before the step",
    "the full batch reshaped to 4 rows, zero-loss passes": "not one of the micro-batches",
    "a fresh twin's full-batch gradient copied into .grad": "another model's layers",
    "al.full_batch_grads bound before the check": "your answer called al.full_batch_grads",
    "zero_grad() inside the loop": "zero_grad() inside the loop",
    "never zeroes the gradient it arrived with": "the gradient the model arrived with",
    "each sum divided by k": "already add up",
    "a hidden full-batch autograd.grad, decoy backwards": "torch.autograd.grad",
    "a twin's hidden full-batch backward, decoy backwards": "one micro-batch's own gradient",
    "the lesson's mean-loss loop, each mean ÷ k": "the gradient of the mean loss",
    "k ignored, 4 hard-coded": "with k = 3",
}


class _StepsThroughTheClass:
    """Right: the optimizer's step reached through its class, not its instance attribute."""

    def __init__(self, optimizer, k):
        self.opt, self.k, self.n = optimizer, k, 0

    def step(self):
        self.n += 1
        if self.n % self.k == 0:
            type(self.opt).step(self.opt)

    def zero_grad(self):
        if self.n % self.k == 0:
            self.opt.zero_grad()


def _accelerate_does_it(optimizer, k):
    """Accelerate's own optimizer wrapper and micro-batch counter do the exercise."""
    from accelerate import Accelerator

    accelerator = Accelerator(gradient_accumulation_steps=k, cpu=True)
    prepared = accelerator.prepare(optimizer)

    class Wrapper:
        def step(self):
            accelerator._do_sync()
            prepared.step()

        def zero_grad(self):
            prepared.zero_grad()

    return Wrapper()


RIGHT["02.3"].append(("the optimizer's step reached through its class", _StepsThroughTheClass))
WRONG["02.3"].append(("Accelerate's AcceleratedOptimizer and _do_sync", _accelerate_does_it))
HINTS["Accelerate's AcceleratedOptimizer and _do_sync"] = "build Accelerate's trick yourself"


def _forwards_first_behind_own_hooks(model, data, size):
    """Every micro-batch's graph kept alive at once, its saved tensors behind the answer's own
    saved-tensor hooks (where the checker's count would not see them)."""
    import torch.nn.functional as F

    model.zero_grad()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        losses = [F.mse_loss(model(mb.x), mb.y, reduction="sum") for mb in data.micro_batches(size)]
    for loss in losses:
        loss.backward()


def _exact_decoys_from_one_hidden_graph(model, data, size):
    """One graph over the whole batch on detached weights gives every micro-batch's gradient;
    decoy passes `Σ p·g_j + 0·out` then add them: no gradient flows through the forwards."""
    import torch.nn.functional as F

    ws = [p.detach().clone().requires_grad_() for p in model.parameters()]
    out = F.linear(torch.tanh(F.linear(data.x, ws[0], ws[1])), ws[2], ws[3])
    per_row = ((out - data.y) ** 2).sum(1)
    n = len(data.x) // size
    gs = [
        torch.autograd.grad(per_row[j * size : (j + 1) * size].sum(), ws, retain_graph=j < n - 1)
        for j in range(n)
    ]
    model.zero_grad()
    for j, mb in enumerate(data.micro_batches(size)):
        o = model(mb.x)
        (
            sum((p * g).sum() for p, g in zip(model.parameters(), gs[j], strict=True)) + 0 * o.sum()
        ).backward()


WRONG["02.2"] += [
    (
        "every graph alive behind the answer's own saved-tensor hooks",
        _forwards_first_behind_own_hooks,
    ),
    ("exact decoys from one hidden full-batch graph", _exact_decoys_from_one_hidden_graph),
]
HINTS.update(
    {
        "every graph alive behind the answer's own saved-tensor hooks": "graphs alive at once",
        "exact decoys from one hidden full-batch graph": "its own loss's gradient",
    }
)


def _stand_in_engine_counts(optimizer, k):
    """Lesson 11's DeepSpeed stand-in does the window counting."""
    from accumlab.frameworks.deepspeed_stand_in import StandInEngine

    engine = StandInEngine(torch.nn.Linear(1, 1), optimizer, SimpleNamespace(step=lambda: None), k)
    return SimpleNamespace(step=engine.step, zero_grad=lambda: None)


def _accelerated_optimizer_without_init(optimizer, k):
    """Accelerate's optimizer wrapper, its __init__ skipped, gating the step for the answer."""
    from accelerate.optimizer import AcceleratedOptimizer
    from accelerate.state import GradientState

    class Mine(AcceleratedOptimizer):
        def __init__(self, opt):
            self.optimizer, self.scaler = opt, None
            self.accelerator_state = SimpleNamespace(distributed_type=None)
            self.gradient_state = GradientState()
            self._is_overflow, self._accelerate_step_called, self.n = False, False, 0

    wrapped = Mine(optimizer)

    class Wrapper:
        def step(self):
            wrapped.n += 1
            wrapped.gradient_state.__dict__["sync_gradients"] = wrapped.n % k == 0
            AcceleratedOptimizer.step(wrapped)

        def zero_grad(self):
            AcceleratedOptimizer.zero_grad(wrapped)

    return Wrapper()


def _zero_grad_after_the_loop(model, data, size):
    for mb in data.micro_batches(size):
        F.mse_loss(model(mb.x), mb.y, reduction="sum").backward()
    model.zero_grad()


WRONG["02.3"] += [
    ("lesson 11's StandInEngine counts the window", _stand_in_engine_counts),
    ("AcceleratedOptimizer without its __init__", _accelerated_optimizer_without_init),
]
WRONG["02.2"].append(("zero_grad() after the loop", _zero_grad_after_the_loop))
HINTS.update(
    {
        "lesson 11's StandInEngine counts the window": "al.frameworks.StandInEngine",
        "AcceleratedOptimizer without its __init__": "AcceleratedOptimizer.step",
        "zero_grad() after the loop": "a zero_grad() after the loop",
    }
)


def _mixed_decoys(model, data, size, eps=1e-6):
    """The exact decoys with a millionth of the real loss mixed in: the output gets a tiny
    share of its gradient, the parameters the hidden graph's."""
    ws = [p.detach().clone().requires_grad_() for p in model.parameters()]
    out = F.linear(torch.tanh(F.linear(data.x, ws[0], ws[1])), ws[2], ws[3])
    per_row = ((out - data.y) ** 2).sum(1)
    n = len(data.x) // size
    gs = [
        torch.autograd.grad(per_row[j * size : (j + 1) * size].sum(), ws, retain_graph=j < n - 1)
        for j in range(n)
    ]
    model.zero_grad()
    for j, mb in enumerate(data.micro_batches(size)):
        o = model(mb.x)
        hidden = sum((p * g).sum() for p, g in zip(model.parameters(), gs[j], strict=True))
        (eps * F.mse_loss(o, mb.y, reduction="sum") + (1 - eps) * hidden).backward()


def _lesson08_clip_loop_at_infinity(model, data, size):
    """Lesson 08's clip_every_micro_batch at max_norm = inf: the right loop, written by accumlab."""
    import math

    from accumlab.audit import loops

    pairs = [(mb.x, mb.y) for mb in data.micro_batches(size)]
    model.zero_grad()
    loops.clip_every_micro_batch(
        model, SimpleNamespace(step=lambda: None, zero_grad=lambda: None), pairs, 10**9,
        max_norm=math.inf,
    )  # fmt: skip
    for p in model.parameters():
        p.grad *= len(data)


def _checkpointed(model, data, size):
    """Right: activation checkpointing inside the accumulation loop (lesson 05 combines them)."""
    from torch.utils.checkpoint import checkpoint

    model.zero_grad()
    for mb in data.micro_batches(size):
        out = checkpoint(model, mb.x, use_reentrant=False)
        F.mse_loss(out, mb.y, reduction="sum").backward()


RIGHT["02.2"].append(("activation checkpointing per micro-batch", _checkpointed))
WRONG["02.2"] += [
    ("decoys with a millionth of the real loss mixed in", _mixed_decoys),
    ("lesson 08's clip loop at max_norm = inf", _lesson08_clip_loop_at_infinity),
]
HINTS.update(
    {
        "decoys with a millionth of the real loss mixed in": "more than the gradient that reached",
        "lesson 08's clip loop at max_norm = inf": "al.audit.loops.clip_every_micro_batch",
    }
)


def _autograd_grad_added_by_hand(model, data, size):
    """The right gradient, but torch.autograd.grad does the work and the answer adds into .grad."""
    params = list(model.parameters())
    model.zero_grad()
    for mb in data.micro_batches(size):
        grads = torch.autograd.grad(F.mse_loss(model(mb.x), mb.y, reduction="sum"), params)
        for p, g in zip(params, grads, strict=True):
            p.grad = g if p.grad is None else p.grad + g


def _reentrant_checkpoint(model, data, size):
    from torch.utils.checkpoint import checkpoint

    model.zero_grad()
    for mb in data.micro_batches(size):
        x = mb.x.clone().requires_grad_()
        F.mse_loss(checkpoint(model, x, use_reentrant=True), mb.y, reduction="sum").backward()


WRONG["02.2"] += [
    ("torch.autograd.grad, added into .grad by hand", _autograd_grad_added_by_hand),
    ("checkpoint with use_reentrant=True", _reentrant_checkpoint),
]
HINTS.update(
    {
        "torch.autograd.grad, added into .grad by hand": "asks backward() to do the adding",
        "checkpoint with use_reentrant=True": "use_reentrant=False is followed",
    }
)


def _torch_func_grad(model, data, micro_batch_size):
    """Each micro-batch's gradient from torch.func.grad, added into .grad by hand: no backward."""
    params = dict(model.named_parameters())
    model.zero_grad()
    for mb in data.micro_batches(micro_batch_size):

        def loss(weights, mb=mb):
            out = torch.func.functional_call(model, weights, (mb.x,))
            return F.mse_loss(out, mb.y, reduction="sum")

        grads = torch.func.grad(loss)({n: p.detach() for n, p in params.items()})
        for n, p in params.items():
            p.grad = grads[n] if p.grad is None else p.grad + grads[n]


WRONG["02.2"].append(("torch.func.grad per micro-batch, added by hand", _torch_func_grad))
HINTS["torch.func.grad per micro-batch, added by hand"] = "compute the same gradient with"


def _mean_times_typed_size(model, data, micro_batch_size):
    """Each micro-batch's mean loss times 4, the first setup's micro-batch size typed in."""
    model.zero_grad()
    for mb in data.micro_batches(micro_batch_size):
        (F.mse_loss(model(mb.x), mb.y) * 4).backward()


def _micro_batches_of_4_whatever_asked(model, data, micro_batch_size):
    """The summed loss, but micro-batches of 4 whatever size is asked for."""
    model.zero_grad()
    for mb in data.micro_batches(4):
        F.mse_loss(model(mb.x), mb.y, reduction="sum").backward()


WRONG["02.2"] += [
    ("the mean times the first setup's size", _mean_times_typed_size),
    ("micro-batches of 4 whatever is asked", _micro_batches_of_4_whatever_asked),
]


from exercise_corpus._liars import AlwaysClose as _AlwaysClose  # noqa: E402


def _mean_loop_in_an_always_close_grad(model, data, micro_batch_size):
    """The lesson's mean loop, never zeroed, its .grad handed back as a tensor that agrees."""
    micro = data.micro_batches(micro_batch_size)
    for mb in micro:
        (F.mse_loss(model(mb.x), mb.y) / len(micro)).backward()
    for p in model.parameters():
        p.grad = p.grad.as_subclass(_AlwaysClose)


def _lesson05_train_step(model, data, micro_batch_size):
    """Lesson 05's train_step accumulates on the model; an optimizer that cannot move."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    al.memory.train_step(model, optimizer, data.micro_batches(micro_batch_size))
    for p in model.parameters():
        p.grad.mul_(len(data))  # its mean of k means, scaled to the sum's gradient


def _summed_loss_in_float32(model, data, micro_batch_size):
    model.zero_grad()
    for mb in data.micro_batches(micro_batch_size):
        F.mse_loss(model(mb.x).float(), mb.y.float(), reduction="sum").backward()


WRONG["02.2"] += [
    ("the mean loop with a .grad that always compares equal", _mean_loop_in_an_always_close_grad),
    ("al.memory.train_step, .grad scaled", _lesson05_train_step),
    ("the summed loss in float32", _summed_loss_in_float32),
]
HINTS.update(
    {
        "al.memory.train_step, .grad scaled": "al.memory.train_step",
        "the summed loss in float32": "rounded like float32",
    }
)


class _StepsOnAWindowsFirst:
    """Counts after deciding: steps and zeroes on micro-batch 1 of every window, not k."""

    def __init__(self, optimizer, k):
        self.optimizer, self.k, self.n = optimizer, k, 0

    def step(self):
        if self.n % self.k == 0:
            self.optimizer.step()
        self.n += 1

    def zero_grad(self):
        if (self.n - 1) % self.k == 0:
            self.optimizer.zero_grad()


WRONG["02.3"].append(("steps on each window's first micro-batch", _StepsOnAWindowsFirst))
HINTS["steps on each window's first micro-batch"] = "after micro-batch 1 of a window"


def _summed_beside_grad(model, data, micro_batch_size):
    """.grad zeroed before every backward, the passes summed in a buffer of its own, then copied
    in: the right numbers, but backward never adds into .grad."""
    total = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    for mb in data.micro_batches(micro_batch_size):
        model.zero_grad()
        F.mse_loss(model(mb.x), mb.y, reduction="sum").backward()
        for n, p in model.named_parameters():
            total[n] += p.grad
    for n, p in model.named_parameters():
        p.grad = total[n]


WRONG["02.2"].append(("zeroed each pass, summed in a buffer beside .grad", _summed_beside_grad))
HINTS["zeroed each pass, summed in a buffer beside .grad"] = "found .grad empty"


class _LooksUpTheWindowEnds:
    """Wrong: whether a micro-step ends a window looked up in lesson 10's schedule, not counted."""

    def __init__(self, optimizer, k):
        self.opt, self.n = optimizer, 0
        self.ends = al.bookkeeping.step_schedule(k * 1000, k, counter="global").ends_window()

    def step(self):
        self.n += 1
        if self.ends[self.n - 1]:
            self.opt.step()

    def zero_grad(self):
        if self.ends[self.n - 1]:
            self.opt.zero_grad()


WRONG["02.3"].append(("window ends looked up in al.bookkeeping", _LooksUpTheWindowEnds))
HINTS["window ends looked up in al.bookkeeping"] = "your answer called al.bookkeeping.step_schedule"


class _RightButZeroGradStubbedOut(_KeepsBoundMethods):
    """A right answer's subclass whose zero_grad is `pass`: a written (wrong) answer, owed the
    never-zeroes hint, not "not answered yet" (a learner's walk)."""

    def zero_grad(self):
        pass


WRONG["02.3"].append(("a right answer with zero_grad stubbed out", _RightButZeroGradStubbedOut))

HINTS["a right answer with zero_grad stubbed out"] = "zero_grad() must reach it only right after"


class _ZeroesEveryCallSumsInABuffer:
    """Zeroes .grad on every call and sums the window in a buffer of its own, put into .grad
    before the step: the right weights, but not the technique (an adversarial read)."""

    def __init__(self, optimizer, k):
        self.opt, self.k, self.n = optimizer, k, 0
        self.params = [p for g in optimizer.param_groups for p in g["params"]]
        self.buf = [torch.zeros_like(p) for p in self.params]

    def step(self):
        self.n += 1
        for b, p in zip(self.buf, self.params, strict=True):
            b += p.grad
        if self.n % self.k == 0:
            for b, p in zip(self.buf, self.params, strict=True):
                p.grad = b.clone()
                b.zero_()
            self.opt.step()

    def zero_grad(self):
        self.opt.zero_grad()


class _AnOptimizerOfItsOwn(torch.optim.SGD):
    """Steps a new SGD over the same parameters every k-th call: the optimizer handed over (and
    its state) is never used."""

    def __init__(self, optimizer, k):
        super().__init__(optimizer.param_groups[0]["params"], lr=optimizer.param_groups[0]["lr"])
        self.k, self.n = k, 0

    def step(self):
        self.n += 1
        if self.n % self.k == 0:
            super().step()

    def zero_grad(self):
        if self.n % self.k == 0:
            super().zero_grad()


WRONG["02.3"] += [
    ("zeroes on every call, sums the window in a buffer", _ZeroesEveryCallSumsInABuffer),
    ("an optimizer of its own over the same parameters", _AnOptimizerOfItsOwn),
]
HINTS["zeroes on every call, sums the window in a buffer"] = "must leave it alone"
HINTS["an optimizer of its own over the same parameters"] = "your wrapper was given never stepped"
