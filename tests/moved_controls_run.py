"""Execute a lesson notebook with nbclient, moving every explorer's controls as soon as a cell has
displayed it, and say exactly what broke.

After each cell, the widgets its outputs display (`application/vnd.jupyter.widget-view+json`
model ids: what a learner sees on the page) are handed to tests/moved_controls_kernel.py inside
the kernel, which moves the controls of every Explorer shown there. The call is silent
(`silent=True`, its result returned through `user_expressions`): no execution count, no history,
no `_`, no name left in the lesson's namespace. The notebook's source is never changed.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
KERNEL_HELPER = HERE / "moved_controls_kernel.py"
MODULE = "_accumlab_moved_controls"  # its name in the kernel's sys.modules
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# defines, runs and deletes one function: the helper module lands in sys.modules only
LOAD = f"""
def __moved_controls_load():
    import importlib.util, sys
    spec = importlib.util.spec_from_file_location({MODULE!r}, {str(KERNEL_HELPER)!r})
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[{MODULE!r}] = module
__moved_controls_load()
del __moved_controls_load
"""


@dataclass
class Failure:
    variant: str
    cell: int  # the failing cell, or the cell that displayed an explorer whose callback raised
    kind: str  # "cell" (the cell raised) or "explorer" (a move raised inside the explorer)
    error: str
    source: str = ""
    moved: list = field(default_factory=list)  # the explorer records moved before the failure


@dataclass
class Run:
    variant: str
    explorers: list = field(default_factory=list)  # records from moved_controls_kernel._move
    failures: list[Failure] = field(default_factory=list)  # at most one of kind "cell", last
    seconds: float = 0.0


def displayed_widgets(outputs) -> list[str]:
    ids = []
    for out in outputs:
        view = out.get("data", {}).get(WIDGET_VIEW) if "data" in out else None
        if view and view.get("model_id"):
            ids.append(view["model_id"])
    return ids


def _cell_error(cell) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            tb = ANSI.sub("", "\n".join(out.get("traceback", [])))
            return tb or f"{out.get('ename')}: {out.get('evalue')}"
    return ""


def _evaluate(client, code: str, expression: str, timeout: float):
    """Run `code` silently, then evaluate `expression` in the kernel; its repr comes back."""
    from nbclient.util import run_sync

    reply = run_sync(client.kc.execute_interactive)(
        code,
        silent=True,
        store_history=False,
        user_expressions={"r": expression} if expression else {},
        timeout=timeout,
        output_hook=lambda msg: None,  # widget updates, nothing else: the run is silent
    )
    content = reply["content"]
    if content["status"] != "ok":
        raise RuntimeError(ANSI.sub("", "\n".join(content.get("traceback", []))))
    if not expression:
        return None
    result = content["user_expressions"]["r"]
    if result["status"] != "ok":
        raise RuntimeError(ANSI.sub("", "\n".join(result.get("traceback", []))))
    return ast.literal_eval(result["data"]["text/plain"])


def run_notebook(
    path: Path, variant: str, *, sweep: bool, timeout: int, kernel: str | None = None
) -> Run:
    """Execute `path` as nbmake does (its folder as cwd, the same per-cell timeout, the notebook's
    own `metadata.execution.timeout` first), moving explorers after each cell; stops at the first
    failing cell (an error inside an explorer's callback is recorded and the run goes on)."""
    import time

    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    timeout = nb.metadata.get("execution", {}).get("timeout", timeout)
    kwargs = {"kernel_name": kernel} if kernel else {}
    client = NotebookClient(nb, timeout=timeout, allow_errors=False, **kwargs)
    run = Run(variant)
    moved: set[str] = set()
    loaded = False
    started = time.perf_counter()
    with client.setup_kernel(cwd=str(path.parent)):
        for index, cell in enumerate(nb.cells):
            try:
                client.execute_cell(cell, index)
            except (CellExecutionError, CellTimeoutError, DeadKernelError) as err:
                text = _cell_error(cell) or ANSI.sub("", str(err))
                failure = Failure(variant, index, "cell", text, cell.source, list(run.explorers))
                run.failures.append(failure)
                break
            if cell.cell_type != "code":
                continue
            shown = [m for m in displayed_widgets(cell.outputs) if m not in moved]
            if not shown:
                continue
            if not loaded:
                _evaluate(client, LOAD, "", timeout)
                loaded = True
            call = (
                f"__import__({MODULE!r}).move_displayed({shown!r}, {variant!r}, {index}, {sweep})"
            )
            try:
                records = json.loads(_evaluate(client, "", call, timeout))
            except Exception as err:  # a move that hangs past the timeout, a dead kernel
                text = f"moving the controls failed: {type(err).__name__}: {err}"
                run.failures.append(Failure(variant, index, "explorer", text, cell.source))
                break
            moved.update(shown)
            run.explorers.extend(records)
            for record in records:
                for error in record["errors"]:  # reported, and the lesson goes on as a learner's
                    text = f"{error['move']}: {error['error']}"
                    run.failures.append(
                        Failure(variant, index, "explorer", text, cell.source, [record])
                    )
    run.seconds = time.perf_counter() - started
    return run


def describe_moves(record: dict) -> str:
    """`explorer` (cell 10, compute accumlab....): micro_batch_size 4 → 8, zero_grad ... ."""
    who = ", ".join(f"`{n}`" for n in record["names"]) or "an unnamed explorer"
    changed = [
        f"{k} {record['start'][k]} → {record['final'][k]}"
        for k in record["final"]
        if record["final"][k] != record["start"][k]
    ]
    unchanged = [k for k in record["final"] if record["final"][k] == record["start"][k]]
    text = f"{who} shown by cell {record['cell']} ({record['compute']}): " + (
        ", ".join(changed) or "no control could move"
    )
    if unchanged:
        text += "; back at its start value in the end (clamped, or no other value): " + ", ".join(
            unchanged
        )
    if record["skipped"]:
        text += f"; skipped: {', '.join(record['skipped'])}"
    return text


def describe_failure(path: Path, failure: Failure, tail: int = 25) -> str:
    lines = [f"{path.name}, variant {failure.variant!r}:"]
    if failure.kind == "cell":
        lines.append(f"  cell {failure.cell} failed after these moves:")
    else:
        lines.append(
            f"  moving the explorer shown by cell {failure.cell} raised inside its callback:"
        )
    lines += [f"    - {describe_moves(r)}" for r in failure.moved] or ["    (no explorer moved)"]
    if failure.kind == "cell":
        lines.append("  cell source:")
        lines += [f"    | {s}" for s in failure.source.splitlines()]
    error = failure.error.strip().splitlines()
    if len(error) > tail:
        error = ["...", *error[-tail:]]
    lines.append("  error:")
    lines += [f"    {s}" for s in error]
    return "\n".join(lines)


def _summary(failure: Failure) -> tuple:
    lines = [s for s in failure.error.strip().splitlines() if s.strip()]
    return failure.kind, failure.cell, lines[-1] if lines else ""


def describe_failures(path: Path, failures: list[Failure]) -> str:
    """All failures of a lesson; one that repeats another variant's (same cell, same last line
    of the error) is told in one line with its moves."""
    parts, seen = [], {}
    for failure in failures:
        key = _summary(failure)
        if key in seen:
            moves = "; ".join(describe_moves(r) for r in failure.moved) or "no explorer moved"
            parts.append(
                f"{path.name}, variant {failure.variant!r}: the same failure as variant "
                f"{seen[key]!r} (cell {failure.cell}: {key[2]}), after: {moves}"
            )
        else:
            seen[key] = failure.variant
            parts.append(describe_failure(path, failure))
    head = f"{path.name}: {len(failures)} failure(s) with moved controls"
    return "\n\n".join([head, *parts])
