"""Results of the lessons' recorders (lessons 05–07): `{"meta": {...}, "results": {...}}` per NAME.

Files in accumlab/results/ come only from a real GPU run (`python -m accumlab.record NAME`), and
ship with the package so CPU-only machines can show them, labelled with where they came from. The
same recorders run on a CPU (`--device cpu --out PATH`): such a file has the same schema, says
`"device": "cpu"`, and is refused inside accumlab/results/.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import json
import os
import sys
from pathlib import Path

import torch

from ._validate_results import check_schema

RESULTS_DIR = Path(__file__).parent / "results"
# tests point the lessons at a folder of CPU stand-in files; a learner never sets this
RESULTS_ENV = "ACCUMLAB_RESULTS_DIR"
SCHEMA_VERSION = 1

# NAME -> the topic module that records it; each exposes `record(device, size) -> dict` and SCHEMA
RECORDERS = {
    "memory": "accumlab.memory.record",  # lesson 05
    "amp": "accumlab.precision.record",  # lesson 06
    "dist": "accumlab.dist.record",  # lesson 07
}

META_SCHEMA = {
    "schema": int,
    "name": str,
    "device": str,  # "cuda" or "cpu"
    "device_name": str,
    "device_count": int,
    "size": str,
    "torch": str,
    "cuda": (str, type(None)),
    "python": str,
    "date": str,
    "command": str,
}


def recorder(name: str):
    """The topic module recording `name` (ValueError naming the choices otherwise)."""
    if name not in RECORDERS:
        raise ValueError(f"name must be one of {', '.join(map(repr, RECORDERS))}, got {name!r}")
    return importlib.import_module(RECORDERS[name])


def validate(name: str, record: dict) -> dict:
    """`record` itself when it has the meta and results schema of `name`; else a ValueError
    listing every problem."""
    problems = check_schema(record, {"meta": META_SCHEMA, "results": recorder(name).SCHEMA})
    if not problems and record["meta"]["device"] not in ("cuda", "cpu"):
        problems.append(
            f"record.meta.device: expected 'cuda' or 'cpu', got {record['meta']['device']!r}"
        )
    if problems:
        raise ValueError(
            f"{name}: the recorded file does not match its schema:\n  " + "\n  ".join(problems)
        )
    return record


def machine_meta(name: str, command: str, device, size: str) -> dict:
    """Where and how a result was produced: device, torch and CUDA versions, date, command."""
    from .device import device_name

    device = torch.device(device)
    return {
        "schema": SCHEMA_VERSION,
        "name": name,
        "device": device.type,
        "device_name": device_name(device),
        "device_count": torch.cuda.device_count() if device.type == "cuda" else 0,
        "size": size,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": sys.version.split()[0],
        "date": _dt.date.today().isoformat(),
        "command": command,
    }


def is_package_results(path: Path) -> bool:
    return Path(path).resolve().parent == RESULTS_DIR.resolve()


def save(name: str, results: dict, command: str, path: Path, *, device, size: str) -> Path:
    """Write `{"meta", "results"}` for `name` to `path` (validated first; a CPU run may not be
    written into accumlab/results/)."""
    record = validate(name, {"meta": machine_meta(name, command, device, size), "results": results})
    path = Path(path)
    if record["meta"]["device"] != "cuda" and is_package_results(path):
        raise ValueError(
            f"{path}: accumlab/results/ holds only results recorded on a GPU; "
            "write a CPU stand-in run elsewhere (--out PATH)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def results_dir() -> Path:
    return Path(os.environ.get(RESULTS_ENV) or RESULTS_DIR)


def load(name: str) -> dict | None:
    """The recorded file for `name`, validated, or None when none has been recorded yet."""
    if not isinstance(name, str) or not name.isidentifier():
        # a name, not a path: "../x" must not read files outside the results folder
        raise ValueError(
            f"name must be a result name such as 'amp' or 'dist', got {type(name).__name__} {name!r}"
        )
    path = results_dir() / f"{name}.json"
    if not path.exists():
        return None
    record = validate(name, json.loads(path.read_text()))
    if record["meta"]["device"] != "cuda" and is_package_results(path):
        raise ValueError(
            f"{path} was recorded on {record['meta']['device']!r}, but accumlab/results/ may hold "
            "only GPU results: delete it"
        )
    return record


def is_standin(record: dict | None) -> bool:
    return record is not None and record["meta"]["device"] != "cuda"


def describe(record: dict | None) -> str:
    """One line a lesson prints above recorded figures, naming their device and date."""
    if record is None:
        return "No GPU results have been recorded for this section yet."
    meta = record.get("meta") if isinstance(record, dict) else None
    keys = ("device", "device_name", "torch", "cuda", "date", "command")
    missing = [k for k in keys if k not in (meta or {})]
    if not isinstance(meta, dict) or missing:
        raise ValueError(
            "record must be what al.load_recorded returns: a dict whose 'meta' holds "
            f"{', '.join(keys)}; got {type(record).__name__}"
            + (f" missing {missing}" if isinstance(meta, dict) else "")
        )
    m = meta
    if is_standin(record):
        return (
            f"CPU STAND-IN run on {m['device_name']} (torch {m['torch']}, {m['date']}, "
            f"`{m['command']}`): the GPU code path executed on a CPU. Not a GPU measurement."
        )
    return (
        f"Recorded on {m['device_name']} (torch {m['torch']}, CUDA {m['cuda']}) on {m['date']} "
        f"with `{m['command']}` — not measured on this machine."
    )
