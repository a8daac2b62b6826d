"""Run a framework offline, quietly, on one CPU thread, and leave nothing behind (lesson 11).

The libraries would otherwise print device banners and per-step log lines into the notebook, and
the Hugging Face ones look for a hub when asked for anything by name. The lesson builds every model
in code, so nothing needs the network (a test runs every framework with sockets refused); the HF_*
switches are a second guard — huggingface_hub reads them when it is first imported, which in the
lesson happens inside this context.
"""

from __future__ import annotations

import gc
import logging
import os
import random
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from .._threads import one_thread

OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}
# the loggers whose INFO lines ("GPU available: False", "Training completed") would flood a cell
LOGGERS = (
    "lightning",
    "lightning.pytorch",
    "lightning.fabric",
    "pytorch_lightning",
    "transformers",
    "accelerate",
)


@contextmanager
def offline_and_quiet() -> Iterator[str]:
    """Inside: HF offline switches set, framework loggers at ERROR, warnings muted, torch on one
    thread; yields a temporary directory for anything a framework insists on writing, removed on
    exit. Every setting is put back afterwards, random generators included (the Trainer seeds
    Python's, NumPy's and torch's on construction)."""
    saved_random = random.getstate()
    saved_numpy = _numpy_state()
    saved_env = {name: os.environ.get(name) for name in OFFLINE}
    saved_levels = {name: logging.getLogger(name).level for name in LOGGERS}
    os.environ.update(OFFLINE)
    for name in LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    folder = tempfile.mkdtemp(prefix="accumlab-frameworks-")
    # The Trainer runs gc.collect() as training starts (accelerate's free_memory): in a notebook
    # holding many objects one full collection took ~0.2 s, 20x the training itself. Freezing
    # what exists now (gc.freeze, the standard library's own switch) makes it scan only the run's
    # objects; unfreeze() hands them back. Skipped when someone else has frozen objects already.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        with warnings.catch_warnings(), one_thread(), torch.random.fork_rng(devices=[]):
            # e.g. Lightning's "does not have many workers": true, and beside the point here
            warnings.simplefilter("ignore")
            yield folder
    finally:
        if freeze:
            gc.unfreeze()
        random.setstate(saved_random)
        if saved_numpy is not None:
            import numpy as np

            np.random.set_state(saved_numpy)
        shutil.rmtree(folder, ignore_errors=True)
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _numpy_state():
    try:
        import numpy as np
    except ImportError:
        return None
    return np.random.get_state()


@contextmanager
def quiet_loggers(*names: str) -> Iterator[None]:
    """Set `names`' loggers to ERROR now — after the library's import, which sets its own level
    (Lightning sets INFO) — and put back the level found here on exit."""
    saved = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
