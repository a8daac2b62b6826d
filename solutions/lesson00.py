"""Solutions to lesson 00's exercises (kept apart from the lesson)."""

import torch

SOLUTIONS = {"00.1": "cuda" if torch.cuda.is_available() else "cpu", "00.2": (8, 3)}
WRONG = {"00.1": "tpu", "00.2": (3, 8)}
