"""Deterministic synthetic data: the same seed gives the same tensors on every machine (lesson 01+)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._validate import positive_int

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
        if isinstance(index, int):
            index = slice(index, index + 1)
        return Data(self.x[index], self.y[index])

    def to(self, *args, **kwargs) -> Data:
        x = self.x.to(*args, **kwargs)
        # integer labels keep their dtype when the data is cast to a float dtype
        y = self.y.to(*args, **kwargs) if self.y.is_floating_point() else self.y.to(x.device)
        return Data(x, y)

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


def _generator(seed: int) -> torch.Generator:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return torch.Generator().manual_seed(seed)


def classic_data(dtype: torch.dtype = torch.float64) -> Data:
    """The two-sample example of lesson 02: x = [4, 2], y = 2x."""
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
    if lengths is None:
        positive_int("n", n)
        positive_int("min_len", min_len)
        positive_int("max_len", max_len)
        if min_len > max_len:
            raise ValueError(
                f"min_len must be <= max_len, got min_len={min_len}, max_len={max_len}"
            )
        lengths = torch.randint(min_len, max_len + 1, (n,), generator=g).tolist()
    else:
        for i, n_i in enumerate(lengths):
            if isinstance(n_i, bool) or not isinstance(n_i, int) or n_i < 0:
                raise ValueError(f"lengths[{i}] must be a non-negative integer, got {n_i!r}")
        if not lengths:
            raise ValueError("lengths must not be empty")
    positive_int("vocab", vocab, minimum=2)
    width = max(max(lengths), 1)
    x = torch.zeros(len(lengths), width, dtype=torch.long)
    y = torch.full((len(lengths), width), IGNORE_INDEX, dtype=torch.long)
    for i, n_i in enumerate(lengths):
        seq = torch.randint(1, vocab, (n_i + 1,), generator=g)
        x[i, :n_i] = seq[:-1]
        y[i, :n_i] = seq[1:]
    return Data(x, y)
