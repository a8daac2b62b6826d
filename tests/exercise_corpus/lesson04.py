"""Lesson 04: right, wrong and unanswered answers for its exercises (see __init__.py).

04.1 and 04.2 ask for a number: the right ones come in the forms a person types (a whole number
of steps as int, float, numpy or 0-d tensor; a momentum rounded to the 3 significant digits the
exercise asks for, float32, numpy, a 0-d tensor, a Fraction); the wrong ones are the numbers the
common mistakes give. Both ask about settings the lesson does not compute: accumlab's own formulas
(old_weight_formula, matching_momentum) answer the lesson's questions, not these, so calling them
gives a wrong number. In 04.3 and 04.4 the answer is code, and a call to accumlab is refused.
"""

from decimal import Decimal
from fractions import Fraction

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import accumlab as al

# --- 04.3: freeze BatchNorm ------------------------------------------------------------------------


BATCHNORM = nn.modules.batchnorm._BatchNorm  # every BatchNorm kind, SyncBatchNorm included


def freeze_by_apply(model):
    """model.apply visits every module; train(False) is what eval() does."""
    model.apply(lambda m: m.train(False) if isinstance(m, BATCHNORM) else None)
    return model


def freeze_by_kinds(model):
    """The BatchNorm classes named one by one."""
    kinds = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)
    for m in model.modules():
        if isinstance(m, kinds):
            m.eval()
    return model


def freeze_by_class_name(model):
    for m in model.modules():
        if "BatchNorm" in type(m).__name__:
            m.eval()
    return model


def freeze_batchnorm1d_only(model):
    """A common mistake: BatchNorm2d, 3d and SyncBatchNorm are not subclasses of BatchNorm1d."""
    model.apply(lambda m: m.train(False) if isinstance(m, nn.BatchNorm1d) else None)
    return model


def freeze_1d_and_2d_only(model):
    """A common mistake: BatchNorm3d and SyncBatchNorm derive from _BatchNorm, not from 1d or 2d."""
    model.apply(lambda m: m.eval() if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) else None)
    return model


def freeze_parameters_only(model):
    """A common mistake: requires_grad_(False) stops gradients, not the batch statistics."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.requires_grad_(False)
    return model


def freeze_by_exact_name(model):
    for m in model.modules():
        if type(m).__name__ == "BatchNorm1d":
            m.eval()
    return model


def freeze_all_then_dropout_back(model):
    """Everything to eval, then dropout back to training: the same modes in the end."""
    model.eval()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.train()
    return model


def freeze_by_flag(model):
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.training = False  # the flag eval() sets
    return model


def replace_batchnorm_by_identity(model):
    """Skips the technique: no BatchNorm left, so nothing couples the samples — and nothing
    normalises either."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, BATCHNORM):
                setattr(parent, name, nn.Identity())
    return model


def remove_dropout_too(model):
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Dropout):
                setattr(parent, name, nn.Identity())
            elif isinstance(child, BATCHNORM):
                child.eval()
    return model


def dropout_rate_zeroed(model):
    """Dropout still in training mode, but dropping nothing."""
    for m in model.modules():
        if isinstance(m, BATCHNORM):
            m.eval()
        elif isinstance(m, nn.Dropout):
            m.p = 0.0
    return model


def freeze_with_requires_grad_off(model):
    """Frozen BatchNorm as detection codebases freeze it: eval mode and fixed scale and shift."""
    for m in model.modules():
        if isinstance(m, BATCHNORM):
            m.eval()
            m.requires_grad_(False)
    return model


def freeze_with_accumlab(model):
    return al.batchnorm.freeze_batchnorm(model)


def stop_updating_only(model):
    """momentum 0: the running statistics stay, but training still normalises with the
    micro-batch's own statistics."""
    for m in model.modules():
        if isinstance(m, BATCHNORM):
            m.momentum = 0.0
    return model


def forward_replaced(model):
    """The layer object stays and reports eval mode, but its forward no longer normalises."""
    for m in model.modules():
        if isinstance(m, BATCHNORM):
            m.eval()
            m.forward = lambda x: x
    return model


def frozen_copy(model):
    import copy

    model = copy.deepcopy(model)
    for m in model.modules():
        if isinstance(m, BATCHNORM):
            m.eval()
    return model


def freeze_stub(model):
    # your code here: loop over model.modules() ...
    return None


# --- 04.4: ghost batch norm ------------------------------------------------------------------------


def ghost_with_functional(x, ghost_batch_size):
    """torch's own batch_norm in training mode, once per chunk: the technique, written with torch."""
    return torch.cat(
        [F.batch_norm(c, None, None, training=True, eps=1e-5) for c in x.split(ghost_batch_size)]
    )


def ghost_with_modules(x, ghost_batch_size):
    """A fresh BatchNorm1d without scale and shift, called on each chunk."""
    out = []
    for start in range(0, len(x), ghost_batch_size):
        layer = nn.BatchNorm1d(x.shape[1], affine=False, dtype=x.dtype).train()
        out.append(layer(x[start : start + ghost_batch_size]))
    return torch.stack([row for chunk in out for row in chunk])


def ghost_in_float32(x, ghost_batch_size):
    x = x.float()
    return torch.cat(
        [
            (c - c.mean(0)) / (c.var(0, unbiased=False) + 1e-5).sqrt()
            for c in x.split(ghost_batch_size)
        ]
    )


def ghost_unbiased(x, ghost_batch_size):
    return torch.cat(
        [(c - c.mean(0)) / (c.var(0) + 1e-5).sqrt() for c in x.split(ghost_batch_size)]
    )


def ghost_without_eps(x, ghost_batch_size):
    return torch.cat(
        [(c - c.mean(0)) / c.var(0, unbiased=False).sqrt() for c in x.split(ghost_batch_size)]
    )


def ghost_with_accumlab(x, ghost_batch_size):
    layer = al.batchnorm.GhostBatchNorm1d(x.shape[1], ghost_batch_size, affine=False)
    return layer.to(x.dtype).train()(x)


def ghost_by_reshape(x, ghost_batch_size):
    """Right only when the rows split evenly: a shorter last chunk breaks the view."""
    chunks = x.view(-1, ghost_batch_size, x.shape[1])
    mean = chunks.mean(1, keepdim=True)
    var = chunks.var(1, unbiased=False, keepdim=True)
    return ((chunks - mean) / (var + 1e-5).sqrt()).view_as(x)


def ghost_by_numpy_reshape(x, ghost_batch_size):
    """The same mistake in numpy: its reshape raises a ValueError, not a RuntimeError."""
    chunks = x.numpy().reshape(-1, ghost_batch_size, x.shape[1])
    mean = chunks.mean(1, keepdims=True)
    var = chunks.var(1, keepdims=True)
    return ((chunks - mean) / np.sqrt(var + 1e-5)).reshape(x.shape)


def ghost_with_micro_batch_stats(x, ghost_batch_size):
    """Calls the package: al.batchnorm.micro_batch_stats hands over each chunk's mean and biased
    variance, measured at a BatchNorm layer's input."""
    layer = nn.Sequential(nn.BatchNorm1d(x.shape[1])).to(x.dtype)
    rows = al.Data(x, torch.zeros(len(x), dtype=torch.long))
    stats = al.batchnorm.micro_batch_stats(layer, rows, ghost_batch_size)
    pieces = zip(x.split(ghost_batch_size), stats["micro_means"], stats["micro_vars"], strict=True)
    return torch.cat([(c - mu) / (v + 1e-5).sqrt() for c, mu, v in pieces])


def ghost_in_numpy(x, ghost_batch_size):
    """numpy throughout, a numpy array returned."""
    a = x.numpy()
    parts = [a[i : i + ghost_batch_size] for i in range(0, len(a), ghost_batch_size)]
    return np.concatenate([(p - p.mean(0)) / np.sqrt(p.var(0) + 1e-5) for p in parts])


def ghost_stub(x, ghost_batch_size):
    # your code here
    return None


def steps_by_logarithm():
    """Solved for s, then rounded up: 4·s·ln 0.9 < ln 0.02."""
    return int(np.ceil(np.log(0.02) / (4 * np.log(0.9))))


def _ghost_made_by_new(x, size):
    """accumlab's layer, built with __new__ and BatchNorm1d's __init__ (its own __init__ skipped)."""
    cls = al.batchnorm.GhostBatchNorm1d
    layer = cls.__new__(cls)
    nn.BatchNorm1d.__init__(
        layer, x.shape[1], affine=False, track_running_stats=False, dtype=x.dtype
    )
    layer.ghost_batch_size = size
    return layer(x)


RIGHT = {
    "04.1": [
        ("an int", 10),
        ("through logarithms, rounded up", steps_by_logarithm()),
        ("numpy int64", np.int64(10)),
        ("0-d tensor", torch.tensor(10)),
        ("a float", 10.0),
    ],
    "04.2": [
        ("rounded to 3 digits", 0.185),
        ("typed to 5 significant digits", 0.18549),
        ("numpy float64", 1 - np.float64(0.95) ** 4),
        ("0-d float32 tensor", 1 - torch.tensor(0.95) ** 4),
        ("Fraction", 1 - Fraction(19, 20) ** 4),
        ("Decimal typed to 4 digits", Decimal("0.1855")),
        ("through logarithms", 1 - float(np.exp(4 * np.log(0.95)))),
    ],
    "04.3": [
        ("model.apply with train(False)", freeze_by_apply),
        ("the BatchNorm classes named one by one", freeze_by_kinds),
        ("'BatchNorm' in the class name", freeze_by_class_name),
        ("training flag set to False", freeze_by_flag),
        ("eval mode and scale and shift fixed too", freeze_with_requires_grad_off),
    ],
    "04.4": [
        ("F.batch_norm per chunk", ghost_with_functional),
        ("a BatchNorm1d per chunk", ghost_with_modules),
        ("computed in float32", ghost_in_float32),
        ("numpy, returning an array", ghost_in_numpy),
    ],
}

WRONG = {
    "04.1": [
        ("counted forwards: 38", 38),
        ("rounded to the nearest step: 9", round(float(np.log(0.02) / (4 * np.log(0.9))))),
        ("the real solution, not rounded up", float(np.log(0.02) / (4 * np.log(0.9)))),
        ("forwards as a real number", np.float64(np.log(0.02) / np.log(0.9))),
        ("calls the package: one step's old weight", al.batchnorm.old_weight_formula(0.1, 4)),
    ],
    "04.2": [
        ("factors added: 4 · 0.05", 0.2),
        ("what survives, 0.95^4", 0.8145),
        ("momentum unchanged", 0.05),
        (
            "calls the package: matching_momentum, the other direction",
            al.batchnorm.matching_momentum(0.05, 4),
        ),
        ("divided by k", torch.tensor(0.0125)),
    ],
    "04.3": [
        ("skips the technique: BatchNorm replaced by Identity", replace_batchnorm_by_identity),
        ("BatchNorm1d only: misses BatchNorm2d, 3d and SyncBatchNorm", freeze_batchnorm1d_only),
        ("BatchNorm1d and 2d: misses BatchNorm3d and SyncBatchNorm", freeze_1d_and_2d_only),
        ("requires_grad_(False) on the BatchNorm layers, modes unchanged", freeze_parameters_only),
        ("type name == 'BatchNorm1d'", freeze_by_exact_name),
        ("calls the package: al.batchnorm.freeze_batchnorm", freeze_with_accumlab),
        ("model.eval(): dropout switched off too", lambda model: model.eval()),
        ("dropout removed", remove_dropout_too),
        ("dropout's rate set to 0", dropout_rate_zeroed),
        ("momentum 0 only: still batch statistics", stop_updating_only),
        ("forward replaced by identity", forward_replaced),
        ("returns a frozen copy", frozen_copy),
    ],
    "04.4": [
        (
            "skips the technique: whole-batch statistics",
            lambda x, g: F.batch_norm(x, None, None, training=True),
        ),
        ("calls the package: al.batchnorm.GhostBatchNorm1d", ghost_with_accumlab),
        ("the package's GhostBatchNorm1d made without __init__", _ghost_made_by_new),
        ("calls the package: al.batchnorm.micro_batch_stats", ghost_with_micro_batch_stats),
        ("unbiased variance", ghost_unbiased),
        ("no eps", ghost_without_eps),
        ("reshape: fails on a shorter last chunk", ghost_by_reshape),
        ("numpy reshape: fails on a shorter last chunk", ghost_by_numpy_reshape),
    ],
}

STUBS = {
    "04.1": [("the lesson's cell", None)],
    "04.2": [("the lesson's cell", None)],
    "04.3": [("the lesson's cell", freeze_stub)],
    "04.4": [("the lesson's cell", ghost_stub)],
}


# dropout silenced while m.training and m.p still look right: it must really drop
def _dropout_forward_identity(model):
    for m in model.modules():
        if isinstance(m, BATCHNORM):
            m.eval()
        if isinstance(m, nn.Dropout):
            m.forward = lambda x: x
    return model


class _QuietDropout(nn.Dropout):
    def forward(self, x):
        return x


def _dropout_class_swapped(model):
    for m in model.modules():
        if isinstance(m, BATCHNORM):
            m.eval()
        if type(m) is nn.Dropout:
            m.__class__ = _QuietDropout
    return model


def _dropout_off_during_forward(model):
    """A pre-hook switches dropout off, a post-hook back on: m.training reads True afterwards."""
    drops = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    for m in model.modules():
        if isinstance(m, BATCHNORM):
            m.eval()

    def off(module, args):
        for d in drops:
            d.training = False

    def on(module, args, out):
        for d in drops:
            d.training = True

    model.register_forward_pre_hook(off)
    model.register_forward_hook(on)
    return model


def _freeze_prebound(model):
    return _PREBOUND_FREEZE(model)


def _chunk_by_count(x, size):
    """torch.chunk into ceil(rows / size) pieces: equal pieces, not chunks of `size` rows."""
    pieces = x.chunk(-(-len(x) // size))
    return torch.cat([F.batch_norm(c, None, None, training=True) for c in pieces])


def _ghost_by_array_split(x, size):
    """Right: numpy's array_split at multiples of size, in float64."""
    import numpy

    cuts = list(range(size, len(x), size))
    parts = numpy.split(x.numpy(), cuts)
    return torch.cat(
        [torch.from_numpy((p - p.mean(0)) / numpy.sqrt(p.var(0) + 1e-5)) for p in parts]
    )


from accumlab.batchnorm import freeze_batchnorm as _PREBOUND_FREEZE  # noqa: E402

RIGHT["04.4"].append(("numpy split at multiples of the size", _ghost_by_array_split))
WRONG["04.3"] += [
    ("dropout's forward replaced by the identity", _dropout_forward_identity),
    ("dropout's class swapped for a silent subclass", _dropout_class_swapped),
    ("hooks switch dropout off during each forward", _dropout_off_during_forward),
    ("al.batchnorm.freeze_batchnorm bound before the check", _freeze_prebound),
]
WRONG["04.4"].append(("torch.chunk into ceil(rows / size) pieces", _chunk_by_count))
HINTS = {
    "reshape: fails on a shorter last chunk": "the last chunk of 10 rows in chunks of 4 has 2",
    "numpy reshape: fails on a shorter last chunk": "does not reshape into equal chunks",
    "dropout's forward replaced by the identity": "dropped 0%",
    "dropout's class swapped for a silent subclass": "dropped 0%",
    "hooks switch dropout off during each forward": "dropped 0%",
    "al.batchnorm.freeze_batchnorm bound before the check": "your answer called al.batchnorm.freeze_batchnorm",
    "torch.chunk into ceil(rows / size) pieces": "torch.chunk(n)",
    "BatchNorm1d only: misses BatchNorm2d, 3d and SyncBatchNorm": "BatchNorm2d, BatchNorm3d and SyncBatchNorm are not subclasses",
    "BatchNorm1d and 2d: misses BatchNorm3d and SyncBatchNorm": "BatchNorm3d and SyncBatchNorm are not subclasses of BatchNorm1d or BatchNorm2d",
    "requires_grad_(False) on the BatchNorm layers, modes unchanged": "set by .eval()",
    "calls the package: al.batchnorm.micro_batch_stats": "al.batchnorm.micro_batch_stats",
    "counted forwards: 38": "number of forwards",
    "rounded to the nearest step: 9": "still above 2 %",
    "the real solution, not rounded up": "whole",
    "calls the package: matching_momentum, the other direction": "other direction",
}


def _freeze_with_finder(model):
    """The package finds the layers: finding every BatchNorm kind is half of 04.3."""
    for bn in al.batchnorm.batchnorm_layers(model):
        bn.eval()
    return model


def _ghost_in_float16(x, size):
    """The right method computed in float16, returned as float64: rounding, not the method."""
    h = x.half()
    out = [(c - c.mean(0)) / (c.var(0, unbiased=False) + 1e-5).sqrt() for c in h.split(size)]
    return torch.cat(out).double()


def _ghost_in_bfloat16(x, size):
    """The right method in bfloat16, returned in bfloat16."""
    b = x.bfloat16()
    return torch.cat(
        [(c - c.mean(0)) / (c.var(0, unbiased=False) + 1e-5).sqrt() for c in b.split(size)]
    )


def _ghost_without_eps_on_constant(x, size):
    """No eps, and every value of the last chunk's column set equal: 0 / 0 gives NaN."""
    out = []
    for c in x.split(size):
        c = c.clone()
        c[:, 2] = 1.0
        out.append((c - c.mean(0)) / c.var(0, unbiased=False).sqrt())
    return torch.cat(out)


WRONG["04.3"].append(("al.batchnorm.batchnorm_layers finds the layers", _freeze_with_finder))
WRONG["04.4"] += [
    ("the right method in float16", _ghost_in_float16),
    ("the right method in bfloat16, returned in bfloat16", _ghost_in_bfloat16),
    ("a constant column without eps: NaN", _ghost_without_eps_on_constant),
]
HINTS.update(
    {
        "al.batchnorm.batchnorm_layers finds the layers": "your answer called al.batchnorm.batchnorm_layers",
        "the right method in float16": "right method, but computed in float16",
        "the right method in bfloat16, returned in bfloat16": "right method, but computed in bfloat16",
        "a constant column without eps: NaN": "are NaN or infinite",
    }
)


class _FreezeObject:
    """An object whose class's __call__ is the refused function."""

    __call__ = staticmethod(al.batchnorm.freeze_batchnorm)


def _stats_via_wrapped(x, size):
    """The decorated helper's undecorated function, reached through __wrapped__."""
    layer = nn.Sequential(nn.BatchNorm1d(x.shape[1])).to(x.dtype)
    rows = al.Data(x, torch.zeros(len(x), dtype=torch.long))
    stats = al.batchnorm.micro_batch_stats.__wrapped__(layer, rows, size)
    pieces = zip(x.split(size), stats["micro_means"], stats["micro_vars"], strict=True)
    return torch.cat([(c - mu) / (v + 1e-5).sqrt() for c, mu, v in pieces])


def _ghost_forward_bound_before(x, size):
    """GhostBatchNorm1d.forward bound to a name before the check, called on a borrowed layer."""
    bn = nn.BatchNorm1d(x.shape[1], affine=False, dtype=x.dtype)
    bn.ghost_batch_size = size
    bn.__class__ = _GHOST
    return _GHOST_FORWARD(bn, x)


def _ghost_in_bfloat16_cast_back(x, size):
    b = x.bfloat16()
    out = [(c - c.mean(0)) / (c.var(0, unbiased=False) + 1e-5).sqrt() for c in b.split(size)]
    return torch.cat(out).float()


from accumlab.batchnorm.remedies import GhostBatchNorm1d as _GHOST  # noqa: E402

_GHOST_FORWARD = _GHOST.forward
WRONG["04.3"].append(("an object whose __call__ is freeze_batchnorm", _FreezeObject()))
WRONG["04.4"] += [
    ("micro_batch_stats.__wrapped__", _stats_via_wrapped),
    ("GhostBatchNorm1d.forward bound before the check", _ghost_forward_bound_before),
    ("the right method in bfloat16, cast back to float32", _ghost_in_bfloat16_cast_back),
]
HINTS.update(
    {
        "an object whose __call__ is freeze_batchnorm": "al.batchnorm.freeze_batchnorm",
        "micro_batch_stats.__wrapped__": "al.batchnorm.micro_batch_stats",
        "GhostBatchNorm1d.forward bound before the check": "write it yourself",
        "the right method in bfloat16, cast back to float32": "computed in bfloat16",
    }
)


def _ghost_one_pass_variance_float32(x, size):
    """E[x²] − E[x]² in float32: right in exact arithmetic, a little over 1e-6 off here."""
    x = x.float()
    pieces = [
        (c - c.mean(0)) * torch.rsqrt((c * c).mean(0) - c.mean(0) ** 2 + 1e-5)
        for c in x.split(size)
    ]
    return torch.cat(pieces)


WRONG["04.4"].append(("one-pass variance in float32", _ghost_one_pass_variance_float32))
HINTS["one-pass variance in float32"] = "loses digits"
HINTS["factors added: 4 · 0.05"] = "if you rounded, give more digits"


from exercise_corpus._copies import compiled_from_source as _compiled_from_source  # noqa: E402
from exercise_corpus._copies import copied_before as _copied_before  # noqa: E402

_FREEZE_COPY = _copied_before(al.batchnorm.freeze_batchnorm)
_FREEZE_FROM_SOURCE = _compiled_from_source(al.batchnorm.freeze_batchnorm)
_FINDER_FROM_SOURCE = _compiled_from_source(al.batchnorm.batchnorm_layers)
_GHOST_FROM_SOURCE = _compiled_from_source(al.batchnorm.GhostBatchNorm1d)


def _freeze_copy(model):
    return _FREEZE_COPY(model)


def _freeze_from_source(model):
    return _FREEZE_FROM_SOURCE(model)


def _finder_from_source(model):
    for bn in _FINDER_FROM_SOURCE(model):
        bn.eval()
    return model


def _ghost_class_from_source(x, size):
    layer = _GHOST_FROM_SOURCE(x.shape[1], size, affine=False, dtype=x.dtype)
    return layer.train()(x)


def _ghost_forward_from_source(x, size):
    """The recompiled class's forward on a plain BatchNorm1d, its own __init__ skipped."""
    bn = nn.BatchNorm1d(x.shape[1], affine=False, track_running_stats=False, dtype=x.dtype)
    bn.ghost_batch_size = size
    bn.__class__ = _GHOST_FROM_SOURCE
    return bn(x)


WRONG["04.3"] += [
    ("freeze_batchnorm copied with types.FunctionType before the check", _freeze_copy),
    ("freeze_batchnorm compiled again from its source", _freeze_from_source),
    ("batchnorm_layers compiled again from its source", _finder_from_source),
]
WRONG["04.4"] += [
    ("GhostBatchNorm1d compiled again from its source", _ghost_class_from_source),
    ("GhostBatchNorm1d's forward compiled again, its __init__ skipped", _ghost_forward_from_source),
]
HINTS.update(
    {
        "freeze_batchnorm copied with types.FunctionType before the check": "al.batchnorm.freeze_batchnorm",
        "freeze_batchnorm compiled again from its source": "al.batchnorm.freeze_batchnorm",
        "batchnorm_layers compiled again from its source": "al.batchnorm.batchnorm_layers",
        "GhostBatchNorm1d compiled again from its source": "al.batchnorm.GhostBatchNorm1d",
        "GhostBatchNorm1d's forward compiled again, its __init__ skipped": "GhostBatchNorm1d.forward",
    }
)


def freeze_every_norm_layer(model):
    """Every norm layer with running statistics switched: InstanceNorm1d too."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._NormBase):
            m.eval()
    return model


WRONG["04.3"] += [
    (
        "eval() everything, dropout back to train(): InstanceNorm switched too",
        freeze_all_then_dropout_back,
    ),
    ("every _NormBase switched: InstanceNorm too", freeze_every_norm_layer),
]
HINTS.update(
    {
        "eval() everything, dropout back to train(): InstanceNorm switched too": "also switched instance",
        "every _NormBase switched: InstanceNorm too": "also switched instance",
    }
)
WRONG["04.2"].append(("rounded twice: 0.18549 → 0.1855 → 0.186", 0.186))
HINTS["rounded twice: 0.18549 → 0.1855 → 0.186"] = "rounded twice"


def ghost_in_longdouble(x, size):
    """numpy in longdouble, a float type torch has no tensor for."""
    rows = np.asarray(x, dtype=np.longdouble)
    out = np.empty_like(rows)
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        mean = chunk.mean(0)
        var = ((chunk - mean) ** 2).mean(0)
        out[start : start + size] = (chunk - mean) / np.sqrt(var + 1e-5)
    return out


RIGHT["04.4"].append(("numpy in longdouble", ghost_in_longdouble))


# --- the checkers' own references, called by their private names ----------------------------------
def _ghost_by_the_checker(x, size):
    from accumlab.exercises._ghost_judge import ghost_reference

    return ghost_reference(x, size)


def _ghost_by_the_checkers_helper(x, size):
    from accumlab.exercises import _ghost_judge

    return _ghost_judge._normalised(x.split(size))


def _frozen_by_the_checker(model):
    from accumlab.exercises.lesson04 import _frozen_by_us

    reference = _frozen_by_us(model)
    for mine, theirs in zip(model.modules(), reference.modules(), strict=True):
        mine.training = theirs.training
    return model


WRONG["04.4"] += [
    ("the checker's ghost_reference", _ghost_by_the_checker),
    ("the checker's _normalised", _ghost_by_the_checkers_helper),
]
WRONG["04.3"].append(("the checker's _frozen_by_us, modes copied back", _frozen_by_the_checker))
WRONG["04.2"].append(("PyTorch's default BatchNorm momentum", 0.1))
HINTS["PyTorch's default BatchNorm momentum"] = "default BatchNorm momentum"


def freeze_three_kinds_named(model):
    """The kinds people name first: BatchNorm3d is left out."""
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.SyncBatchNorm)):
            m.eval()
    return model


def freeze_by_functional_forward(model):
    """FrozenBatchNorm-style: each layer's forward replaced by F.batch_norm with training=False;
    the layers stay in training mode, so the next model.train() is not what unfreezes them."""
    for m in model.modules():
        if isinstance(m, BATCHNORM):

            def frozen_forward(x, bn=m):
                return F.batch_norm(
                    x, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0, bn.eps
                )

            m.forward = frozen_forward
    return model


WRONG["04.3"] += [
    ("BatchNorm1d, 2d and SyncBatchNorm named: misses BatchNorm3d", freeze_three_kinds_named),
    ("forward replaced by F.batch_norm(training=False)", freeze_by_functional_forward),
]
HINTS["BatchNorm1d, 2d and SyncBatchNorm named: misses BatchNorm3d"] = "volume (BatchNorm3d)"
HINTS["forward replaced by F.batch_norm(training=False)"] = "switch each layer's mode with .eval()"


def _expected_from_the_callers_frame(x, ghost_batch_size):
    """Reads the checker's expected output out of a calling frame, if one holds it."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        if isinstance(frame.f_locals.get("expected"), torch.Tensor):
            return frame.f_locals["expected"].clone()
        frame = frame.f_back
    return torch.zeros_like(x)


WRONG["04.4"].append(
    ("the expected output read from a caller's frame", _expected_from_the_callers_frame)
)


def freeze_after_resetting_statistics(model):
    """Eval mode, but from statistics the answer reset itself: the layer no longer holds them."""
    for m in model.modules():
        if isinstance(m, BATCHNORM):
            m.reset_running_stats()
            m.eval()
    return model


def freeze_with_every_weight_frozen(model):
    """Eval mode right, and requires_grad switched off everywhere: nothing would train."""
    for m in model.modules():
        if isinstance(m, BATCHNORM):
            m.eval()
    model.requires_grad_(False)
    return model


WRONG["04.3"] += [
    ("running statistics reset, then eval()", freeze_after_resetting_statistics),
    ("eval() and requires_grad_(False) on every parameter", freeze_with_every_weight_frozen),
]
HINTS["running statistics reset, then eval()"] = "reset or overwrote the running statistics"
HINTS["eval() and requires_grad_(False) on every parameter"] = "not the weights"


def _ghost_plus_an_imaginary_part(x, ghost_batch_size):
    """The right normalisation plus 5j: a cast to float64 would drop the imaginary part."""
    chunks = x.split(ghost_batch_size)
    return (
        torch.cat([(c - c.mean(0)) / (c.var(0, unbiased=False) + 1e-5).sqrt() for c in chunks]) + 5j
    )


WRONG["04.4"].append(("the right values plus an imaginary part", _ghost_plus_an_imaginary_part))
HINTS["the right values plus an imaginary part"] = "return real numbers"


from exercise_corpus._liars import AlwaysClose as _AlwaysClose  # noqa: E402


def _zeros_that_always_compare_equal(x, ghost_batch_size):
    return torch.zeros_like(x).as_subclass(_AlwaysClose)


WRONG["04.4"].append(("zeros that always compare equal", _zeros_that_always_compare_equal))
HINTS["zeros that always compare equal"] = "use each chunk's mean"


class _FoldedAffine(nn.Module):
    """A BatchNorm's eval-mode arithmetic folded into constants; the layer kept as a child that
    is never called."""

    def __init__(self, bn):
        super().__init__()
        self.bn = bn.eval()
        self.register_buffer("scale", bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps))
        self.register_buffer("shift", bn.bias.detach() - bn.running_mean * self.scale)

    def forward(self, x):
        shape = [1, -1] + [1] * (x.dim() - 2)
        return x * self.scale.view(shape) + self.shift.view(shape)


def _batchnorm_folded_into_unused_children(model):
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.modules.batchnorm._BatchNorm):
                setattr(module, name, _FoldedAffine(child))
    return model


WRONG["04.3"].append(
    ("each BatchNorm folded, kept as an unused child", _batchnorm_folded_into_unused_children)
)
HINTS["each BatchNorm folded, kept as an unused child"] = "were not called in a forward"
