"""Results recorded on a real GPU, shipped with the package so CPU-only machines can show them
(lessons 05–07). Each file in accumlab/results/NAME.json holds {"meta": {...}, "results": {...}}.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import sys
from pathlib import Path

import torch

RESULTS_DIR = Path(__file__).parent / "results"


def machine_meta(command: str) -> dict:
    """Where and how a result was produced: device, torch and CUDA versions, date, command."""
    gpu = torch.cuda.is_available()
    return {
        "device": torch.cuda.get_device_name(0)
        if gpu
        else platform.processor() or platform.machine(),
        "device_count": torch.cuda.device_count() if gpu else 0,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": sys.version.split()[0],
        "date": _dt.date.today().isoformat(),
        "command": command,
    }


def save(name: str, results: dict, command: str, directory: Path | None = None) -> Path:
    path = Path(directory or RESULTS_DIR) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"meta": machine_meta(command), "results": results}, indent=1) + "\n"
    )
    return path


def load(name: str) -> dict | None:
    """The recorded file for `name`, or None when no GPU run has been recorded yet."""
    if not isinstance(name, str) or not name.isidentifier():
        # a name, not a path: "../x" must not read files outside accumlab/results
        raise ValueError(
            f"name must be a result name such as 'amp' or 'dist', got {type(name).__name__} {name!r}"
        )
    path = RESULTS_DIR / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def describe(record: dict | None) -> str:
    """One line a lesson prints above recorded figures, naming their device and date."""
    if record is None:
        return "No GPU results have been recorded for this section yet."
    meta = record.get("meta") if isinstance(record, dict) else None
    missing = [k for k in ("device", "torch", "cuda", "date", "command") if k not in (meta or {})]
    if not isinstance(meta, dict) or missing:
        raise ValueError(
            "record must be what al.load_recorded returns: a dict whose 'meta' holds device, "
            f"torch, cuda, date and command; got {type(record).__name__}"
            + (f" missing {missing}" if isinstance(meta, dict) else "")
        )
    m = meta
    return (
        f"Recorded on {m['device']} (torch {m['torch']}, CUDA {m['cuda']}) on {m['date']} "
        f"with `{m['command']}` — not measured on this machine."
    )
