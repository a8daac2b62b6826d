"""Lesson 00 exercises: using the environment report and an explorer from code."""

from __future__ import annotations

import torch

from . import exercise


@exercise("00.1", 1, "Read the environment report")
def _device(answer):
    # answer: the device type al.setup() chose on this machine, as a string
    if not isinstance(answer, str):
        return "answer with a string such as env.device.type"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if answer != expected:
        return "print(env) shows the device al.setup() picked; read its .type"
    return None


@exercise("00.2", 1, "Drive an explorer from code")
def _explorer_setting(answer):
    # answer: (micro_batch_size, accumulation_steps) that covers exactly 24 samples in 3 micro-batches
    if not (
        isinstance(answer, tuple) and len(answer) == 2 and all(isinstance(v, int) for v in answer)
    ):
        return "answer with a pair of integers: (micro_batch_size, accumulation_steps)"
    micro, k = answer
    if k != 3:
        return "3 micro-batches means 3 accumulation steps"
    if micro * k != 24:
        return "the samples covered are micro_batch_size × accumulation_steps"
    return None
