"""The effective batch counted in samples and in tokens: micro-batch × k × ranks sequences per
optimizer step, but a varying number of real tokens. Lesson 10 (lesson 03 gives the per-token
weights that make a varying count harmless)."""

from __future__ import annotations

from dataclasses import dataclass

from .._validate import _is_int, positive_int, sequence


@dataclass(frozen=True)
class TokenBudget:
    """Per optimizer step (lesson 10): sequences, real (non-padding) tokens, and tokens the model
    processed when every micro-batch is padded to its own longest sequence."""

    samples: list[int]
    real: list[int]
    padded: list[int]

    @property
    def steps(self) -> int:
        return len(self.samples)


def tokens_per_step(
    lengths, micro_batch_size: int, accumulation_steps: int, ranks: int = 1
) -> TokenBudget:
    """Split sequences of `lengths` real tokens, in order, into optimizer steps of
    micro_batch_size × accumulation_steps × ranks sequences (the last step may be short), each
    made of micro-batches of micro_batch_size sequences. Lesson 10."""
    if hasattr(lengths, "tolist"):
        lengths = lengths.tolist()
    lengths = sequence("lengths", lengths)
    for i, n in enumerate(lengths):
        if not _is_int(n) or n < 0:  # the shared integer rule: numpy and 0-d tensors, no bool
            raise ValueError(f"lengths[{i}] must be a non-negative integer, got {n!r}")
    lengths = [int(n) for n in lengths]
    mb = positive_int("micro_batch_size", micro_batch_size)
    window = mb * positive_int("accumulation_steps", accumulation_steps)
    window *= positive_int("ranks", ranks)
    samples, real, padded = [], [], []
    for start in range(0, len(lengths), window):
        seqs = lengths[start : start + window]
        samples.append(len(seqs))
        real.append(sum(seqs))
        # dynamic padding: each micro-batch is as wide as its longest sequence
        padded.append(
            sum(len(seqs[i : i + mb]) * max(seqs[i : i + mb]) for i in range(0, len(seqs), mb))
        )
    return TokenBudget(samples, real, padded)
