"""Deterministic synthetic data: the same seed gives the same tensors on every machine (lesson 01+)."""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch

from ._validate import (
    MAX_STEPS,
    _is_int,
    device,
    finite_float,
    fits_in_memory,
    float_dtype,
    positive_int,
    seed,
    sequence,
)

IGNORE_INDEX = -100  # the label PyTorch's cross-entropy skips: padding in token data


@dataclass(frozen=True)
class Data:
    """Inputs `x` and targets `y`, aligned on the first dimension. Slicing gives `Data` again."""

    x: torch.Tensor
    y: torch.Tensor

    def __post_init__(self):
        if not isinstance(self.x, torch.Tensor) or not isinstance(self.y, torch.Tensor):
            raise ValueError(
                f"x and y must be tensors, got {type(self.x).__name__} and {type(self.y).__name__}"
            )
        if self.x.dim() == 0 or self.y.dim() == 0:
            raise ValueError("x and y need a batch dimension; got a 0-d tensor")
        if len(self.x) != len(self.y):
            raise ValueError(
                f"x and y must have the same length, got len(x)={len(self.x)}, len(y)={len(self.y)}"
            )

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index) -> Data:
        if _is_int(index):
            index = operator.index(index)
            # past the end is an IndexError: it also ends `for sample in data` and unpacking
            if not -len(self) <= index < len(self):
                raise IndexError(f"index {index} is out of range for {len(self)} samples")
            index = slice(index, index + 1 if index != -1 else None)
        elif isinstance(index, bool) or not isinstance(index, (slice, list, torch.Tensor)):
            raise ValueError(
                f"index must be an integer, a slice, a list or a tensor of indices, got {index!r}"
            )
        return Data(self.x[index], self.y[index])

    def to(self, *args, device=None, dtype=None) -> Data:
        """`data.to("cuda")`, `data.to(torch.float32)`, `data.to(device, dtype)`: the dtype applies
        to floating tensors only, so token ids and class labels stay integers."""
        for arg in args:
            if isinstance(arg, torch.dtype) and dtype is None:
                dtype = arg
            elif device is None and not isinstance(arg, torch.dtype):
                device = arg
            else:
                raise ValueError(f"to() takes one device and one dtype, got {args!r}")
        dev = _device("device", device) if device is not None else self.x.device
        if dtype is not None:
            float_dtype("dtype", dtype)

        def move(t: torch.Tensor) -> torch.Tensor:
            return t.to(dev, dtype) if dtype is not None and t.is_floating_point() else t.to(dev)

        return Data(move(self.x), move(self.y))

    def micro_batches(self, micro_batch_size: int) -> list[Data]:
        """Consecutive chunks of `micro_batch_size` samples; the last one may be shorter."""
        positive_int("micro_batch_size", micro_batch_size)
        if micro_batch_size > len(self):
            raise ValueError(
                f"micro_batch_size must be at most the number of samples ({len(self)}), "
                f"got {micro_batch_size}"
            )
        return [self[i : i + micro_batch_size] for i in range(0, len(self), micro_batch_size)]

    def first_window(self, micro_batch_size: int, accumulation_steps: int) -> Data:
        """The samples of one full optimizer step: the first micro_batch_size × k of them."""
        positive_int("micro_batch_size", micro_batch_size)
        positive_int("accumulation_steps", accumulation_steps)
        size = micro_batch_size * accumulation_steps
        if size > len(self):
            raise ValueError(
                f"micro_batch_size × accumulation_steps = {size} exceeds the {len(self)} samples available"
            )
        return self[:size]

    def lengths(self) -> torch.Tensor:
        """Real (non-padding) tokens per sequence, for token data."""
        return (self.y != IGNORE_INDEX).sum(dim=-1)


_device = device  # the parameter of Data.to is called `device` too


def _generator(value: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed("seed", value))


def _fits(call: str, elements: int, dtype: torch.dtype, what: str) -> None:
    fits_in_memory(f"{call} ({elements:,} values for {what})", elements * dtype.itemsize)


def classic_data(dtype: torch.dtype = torch.float64) -> Data:
    """The two-sample example of lesson 02: x = [4, 2], y = 2x."""
    float_dtype("dtype", dtype)
    x = torch.tensor([[4.0], [2.0]], dtype=dtype)
    return Data(x, 2 * x)


def regression_data(
    n: int = 64,
    features: int = 4,
    outputs: int = 1,
    *,
    noise: float = 0.1,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> Data:
    """y = x·W + noise with a fixed random W. Lessons 02–03."""
    n, features, outputs = (
        positive_int(k, v) for k, v in (("n", n), ("features", features), ("outputs", outputs))
    )
    noise = finite_float("noise", noise, minimum=0.0)  # a standard deviation
    float_dtype("dtype", dtype)
    call = f"regression_data(n={n}, features={features}, outputs={outputs})"
    _fits(call, n * (features + outputs) + features * outputs, dtype, "x, y and W")
    g = _generator(seed)
    x = torch.randn(n, features, generator=g, dtype=dtype)
    w = torch.randn(features, outputs, generator=g, dtype=dtype)
    y = x @ w + noise * torch.randn(n, outputs, generator=g, dtype=dtype)
    return Data(x, y)


def classification_data(
    n: int = 128,
    features: int = 8,
    classes: int = 3,
    *,
    spread: float = 1.0,
    shift: float = 0.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> Data:
    """Gaussian blobs, one per class; `shift` moves every feature's mean (BatchNorm lesson)."""
    positive_int("n", n)
    positive_int("features", features)
    positive_int("classes", classes, minimum=2)
    spread = finite_float("spread", spread, minimum=0.0)  # a standard deviation
    shift = finite_float("shift", shift)
    float_dtype("dtype", dtype)
    call = f"classification_data(n={n}, features={features}, classes={classes})"
    _fits(call, (n + classes) * features + n, dtype, "x, y and the class centres")
    g = _generator(seed)
    centres = 2.0 * torch.randn(classes, features, generator=g, dtype=dtype)
    y = torch.randint(0, classes, (n,), generator=g)
    x = centres[y] + spread * torch.randn(n, features, generator=g, dtype=dtype) + shift
    return Data(x, y)


def token_data(
    n: int = 16,
    *,
    min_len: int = 2,
    max_len: int = 24,
    vocab: int = 32,
    seed: int = 0,
    lengths: list[int] | None = None,
) -> Data:
    """Padded token sequences: x holds token ids, y the next-token labels, IGNORE_INDEX on padding.

    Give `lengths` to fix each sequence's number of real tokens; otherwise they are drawn uniformly
    from [min_len, max_len]. Lesson 03.
    """
    g = _generator(seed)
    # one Python step per sequence: bounded like every other loop (see _validate.MAX_STEPS)
    why = "token_data builds one sequence at a time in Python"
    if lengths is None:
        positive_int("n", n, maximum=MAX_STEPS, why=why)
        positive_int("min_len", min_len)
        positive_int("max_len", max_len)
        if min_len > max_len:
            raise ValueError(
                f"min_len must be <= max_len, got min_len={min_len}, max_len={max_len}"
            )
        _fits(f"token_data(n={n}, max_len={max_len})", 2 * n * (max_len + 1), torch.long, "x, y")
        lengths = torch.randint(min_len, max_len + 1, (n,), generator=g).tolist()
    else:
        lengths = sequence("lengths", lengths)
        positive_int("len(lengths)", len(lengths), maximum=MAX_STEPS, why=why)
        # numpy and 0-d tensor integers count as integers, as everywhere else (one shared rule)
        lengths = [positive_int(f"lengths[{i}]", n_i, minimum=0) for i, n_i in enumerate(lengths)]
        longest = max(lengths) + 1
        _fits(
            f"token_data(lengths with max {longest - 1})",
            2 * len(lengths) * longest,
            torch.long,
            "x, y",
        )
    positive_int("vocab", vocab, minimum=2)
    width = max(max(lengths), 1)
    x = torch.zeros(len(lengths), width, dtype=torch.long)
    y = torch.full((len(lengths), width), IGNORE_INDEX, dtype=torch.long)
    for i, n_i in enumerate(lengths):
        seq = torch.randint(1, vocab, (n_i + 1,), generator=g)
        x[i, :n_i] = seq[:-1]
        y[i, :n_i] = seq[1:]
    return Data(x, y)
