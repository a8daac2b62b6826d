"""Lesson 07: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import math
from fractions import Fraction

import numpy as np
import torch


# --- 07.3 --------------------------------------------------------------------------------------
def divisor_as_tensor(local_tokens, global_tokens, world_size, k):
    counts = torch.tensor([float(global_tokens)])  # as an all-reduced count arrives
    return counts.sum() / world_size / k  # a 0-d tensor


def divisor_exact(local_tokens, global_tokens, world_size, k):
    return Fraction(global_tokens, world_size * k)


def divisor_local(local_tokens, global_tokens, world_size, k):
    return local_tokens  # each rank's own tokens: a mean of per-rank means


def divisor_global(local_tokens, global_tokens, world_size, k):
    return global_tokens  # forgets both DDP's average and the backward's k


# the divisors of the cases the checker once always used, typed in: they fit no fresh draw
_TYPED_07_3 = {(96, 2, 4): 12.0, (10, 1, 2): 5.0, (40, 4, 8): 1.25, (12, 3, 3): 4 / 3}


def divisor_typed_in(local_tokens, global_tokens, world_size, k):
    return _TYPED_07_3.get((global_tokens, world_size, k), 1.0)


def divisor_one_without_tokens(local_tokens, global_tokens, world_size, k):
    """Right where the rank has tokens; 1 where it has none (no longer 'close — more digits')."""
    return global_tokens / (world_size * k) if local_tokens else 1.0


def divisor_integer_parts(local_tokens, global_tokens, world_size, k):
    """Another right form: a numpy float64 from integer parts, the ranks' product first."""
    return np.float64(global_tokens) / np.int64(world_size * k)


def divisor_bfloat16(local_tokens, global_tokens, world_size, k):
    """The right method in bfloat16 (a count kept in a 16-bit tensor): 12 / 9 is 1.3359 there."""
    return torch.tensor(float(global_tokens), dtype=torch.bfloat16) / (world_size * k)


def divisor_float32(local_tokens, global_tokens, world_size, k):
    """The right method in float32 (an all-reduced count in a float32 tensor), a 0-d tensor."""
    return torch.tensor(float(global_tokens)) / torch.tensor(float(world_size * k))


def divisor_stub(local_tokens, global_tokens, world_size, k):
    return None  # your code


# --- 07.4 --------------------------------------------------------------------------------------
def grad_bytes_by_chunks(shapes, world_size, element_size):
    """Another algorithm: build the tensors, split dim 0 as torch.chunk would after padding."""
    each = full = 0
    for shape in shapes:
        rows = shape[0]
        per_rank = -(-rows // world_size)  # ceil without math
        rest = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
        each += per_rank * rest
        full += rows * rest
    return np.int64(each * element_size), torch.tensor(full * element_size)


def grad_bytes_tensors(shapes, world_size, element_size):
    """Padding by integer arithmetic, (rows + ranks - 1) // ranks, as a 1-d tensor pair."""
    each = sum((s[0] + world_size - 1) // world_size * math.prod(s[1:]) for s in shapes)
    full = sum(math.prod(s) for s in shapes)
    return torch.tensor([each * element_size, full * element_size])


def grad_bytes_calls_accumlab(shapes, world_size, element_size):
    from accumlab.exercises.lesson07 import fsdp_bytes_expected

    return fsdp_bytes_expected(shapes, world_size, element_size)  # the checker's own reference


def grad_bytes_unsharded_both(shapes, world_size, element_size):
    full = sum(int(np.prod(s)) for s in shapes) * element_size
    return full, full  # as if syncing every micro-step kept the whole gradient


def grad_bytes_swapped(shapes, world_size, element_size):
    sharded = sum(-(-s[0] // world_size) * int(np.prod(s[1:])) for s in shapes) * element_size
    full = sum(int(np.prod(s)) for s in shapes) * element_size
    return full, sharded


# four cases answered from a table, the formula nowhere: drawn cases must refuse it
_TABLE_07_4 = {
    (((64, 16), (64,), (64, 64), (64,), (1, 64), (1,)), 2, 8): (21_512, 42_504),
    (((10, 3), (10,)), 4, 4): (48, 160),
    (((7,),), 3, 2): (6, 14),
    (((128, 128),), 1, 4): (65_536, 65_536),
}


def grad_bytes_typed_in(shapes, world_size, element_size):
    return _TABLE_07_4.get((tuple(tuple(s) for s in shapes), world_size, element_size), (0, 0))


def grad_bytes_unpadded(shapes, world_size, element_size):
    """Each rank's share of the elements, as if dimension 0 were split without padding."""
    full = sum(math.prod(s) for s in shapes) * element_size
    return full // world_size, full


def grad_bytes_stub(shapes, world_size, element_size):
    return None  # your code


def _reference_07_4():
    from accumlab.exercises.lesson07 import fsdp_bytes_expected

    return fsdp_bytes_expected


def _answer_key_07_4():
    """The repository's answer key imported as a learner would (`from solutions.lesson07 import
    fsdp_grad_bytes`, with the repository on the path): its module is `solutions.lesson07`."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "solutions" / "lesson07.py"
    spec = importlib.util.spec_from_file_location("solutions.lesson07", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fsdp_grad_bytes


def grad_bytes_padded_rows(shapes, world_size, element_size):
    """Another algorithm: pad dimension 0 to a multiple of the ranks, then divide."""
    each = full = 0
    for shape in shapes:
        rows, rest = shape[0], math.prod(shape[1:])
        padded = rows + (-rows) % world_size
        each += padded // world_size * rest
        full += rows * rest
    return each * element_size, full * element_size


RIGHT = {
    "07.1": [
        ("a list", [18, 3, 18]),
        ("numpy integers", (np.int64(18), np.int64(3), np.int64(18))),
        ("a 1-d tensor", torch.tensor([18, 3, 18])),
        ("floats that are whole", (18.0, 3.0, 18.0)),
    ],
    "07.2": [
        ("a set", {"A", "C", "D"}),
        ("lower case, other order, separated", "d, c, a"),
        ("a list", ["C", "D", "A"]),
    ],
    "07.3": [
        ("a 0-d tensor from an all-reduced count", divisor_as_tensor),
        ("an exact fraction", divisor_exact),
        (
            "a lambda",
            lambda local_tokens, global_tokens, world_size, k: global_tokens / world_size / k,
        ),
        ("float32 tensors", divisor_float32),
        ("a numpy float64 from integer parts", divisor_integer_parts),
    ],
    "07.4": [
        ("ceil by negative floor division, numpy and torch integers", grad_bytes_by_chunks),
        ("(rows + ranks - 1) // ranks, a 1-d tensor pair", grad_bytes_tensors),
        ("dimension 0 padded to a multiple of the ranks", grad_bytes_padded_rows),
    ],
}
WRONG = {
    "07.1": [
        ("forgot that no_sync must wrap the forward", (18, 3, 3)),
        ("the last micro-step syncs one bucket", (18, 1, 18)),
        ("no_sync saves nothing", (18, 18, 18)),
        ("a string", "18, 3, 18"),
        ("two numbers", (18, 3)),
        ("the first optimizer step, before DDP's bucket rebuild", (16, 1, 16)),
    ],
    "07.2": [
        ("the flag set after the forward too", "ABCD"),
        ("no_sync on every micro-step too", "ACDE"),
        ("only the context manager", "A"),
        ("all five", "ABCDE"),
        ("one right letter alone", "D"),
        ("one wrong letter alone", "B"),
        ("not letters", 12),
    ],
    "07.3": [
        ("each rank's own tokens", divisor_local),
        ("all tokens, no division by ranks or k", divisor_global),
        (
            "divides by k twice",
            lambda local_tokens, global_tokens, world_size, k: global_tokens / (world_size * k * k),
        ),
        ("not a function", 12.0),
        (
            "rounded to 3 decimals (close: more digits)",
            lambda local_tokens, global_tokens, world_size, k: round(
                global_tokens / (world_size * k), 3
            ),
        ),
        ("the right method in bfloat16 (close: more precision)", divisor_bfloat16),
        ("the old fixed cases' divisors typed in", divisor_typed_in),
        ("1 for a rank without tokens", divisor_one_without_tokens),
    ],
    "07.4": [
        ("the whole gradient either way", grad_bytes_unsharded_both),
        ("the pair swapped", grad_bytes_swapped),
        ("one number", lambda shapes, world_size, element_size: 8),
        ("calls accumlab's own reference", grad_bytes_calls_accumlab),
        ("is accumlab's own reference", _reference_07_4()),
        ("is the repository's answer key", _answer_key_07_4()),
        ("four cases typed in", grad_bytes_typed_in),
        ("dimension 0 split without padding", grad_bytes_unpadded),
    ],
}
# the words each of these wrong answers' hints must contain (tests/test_exercises.py); 07.2's
# gaming sequence gets one hint, whatever the letters: it cannot walk to the answer
_SAME_07_2 = "not this set of loops"
HINTS = {
    "all five": _SAME_07_2,
    "no_sync on every micro-step too": _SAME_07_2,
    "only the context manager": _SAME_07_2,
    "one right letter alone": _SAME_07_2,
    "one wrong letter alone": _SAME_07_2,
    "the flag set after the forward too": _SAME_07_2,
    "the right method in bfloat16 (close: more precision)": "close — compute it in more precision",
    "is the repository's answer key": "the solutions folder's",
    "1 for a rank without tokens": "a rank with no tokens divides by what every other rank",
    "dimension 0 split without padding": "FSDP2 pads dimension 0",
    "the first optimizer step, before DDP's bucket rebuild": "count a later step",
}
STUBS = {
    "07.1": [("the notebook's cell", None), ("a tuple of Nones", (None, None, None))],
    "07.2": [("the notebook's cell", None)],
    "07.3": [("the notebook's cell", divisor_stub)],
    "07.4": [("the notebook's cell", grad_bytes_stub)],
}


def _reference_rebuilt_from_its_code():
    """The checker's own reference rebuilt from its code object, outside accumlab."""
    import math
    import types

    from accumlab.exercises import lesson07

    return types.FunctionType(lesson07.fsdp_bytes_expected.__code__, {"math": math})


WRONG["07.4"].append(
    ("the checker's reference rebuilt from its code", _reference_rebuilt_from_its_code())
)
HINTS["the checker's reference rebuilt from its code"] = "write it yourself"


def _reference_rebuilt_from_its_source():
    """The checker's own reference compiled again from its source text."""
    import inspect
    import math

    from accumlab.exercises import lesson07

    scope: dict = {}
    exec(inspect.getsource(lesson07.fsdp_bytes_expected), {"math": math}, scope)
    return scope["fsdp_bytes_expected"]


WRONG["07.4"].append(
    ("the checker's reference compiled from its source", _reference_rebuilt_from_its_source())
)
HINTS["the checker's reference compiled from its source"] = "write it yourself"


_REFERENCE_FROM_SOURCE = _reference_rebuilt_from_its_source()


def _wrapped_reference_from_source(shapes, world_size, element_size):
    """A one-line function of the learner's own around the recompiled reference."""
    return _REFERENCE_FROM_SOURCE(shapes, world_size, element_size)


WRONG["07.4"].append(
    ("a wrapper around the reference compiled from its source", _wrapped_reference_from_source)
)
HINTS["a wrapper around the reference compiled from its source"] = "write it yourself"

_REFERENCE_FROM_CODE = _reference_rebuilt_from_its_code()


def _wrapped_reference_from_code(shapes, world_size, element_size):
    """A one-line function of the learner's own around the reference rebuilt from its code."""
    return _REFERENCE_FROM_CODE(shapes, world_size, element_size)


WRONG["07.4"].append(
    ("a wrapper around the reference rebuilt from its code", _wrapped_reference_from_code)
)
HINTS["a wrapper around the reference rebuilt from its code"] = "write it yourself"
