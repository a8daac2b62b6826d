"""Lesson 05's figures: pure functions, data in, matplotlib Figure out (no widget code here)."""

from __future__ import annotations

from matplotlib.figure import Figure

PART_COLOURS = {
    "parameters": "tab:blue",
    "gradients": "tab:orange",
    "optimizer state": "tab:green",
    "saved activations": "tab:red",
}


def byte_unit(largest: float) -> tuple[float, str]:
    """(divisor, name) that shows `largest` bytes as a number between 1 and 1024."""
    for power, name in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if largest >= 1024**power:
            return 1024.0**power, name
    return 1.0, "B"


def plot_footprint(
    breakdowns: dict[str, dict[str, int]], *, title: str = "What training keeps in memory"
) -> Figure:
    """Stacked bars, one per label: bytes of each part ({"parameters": ..., ...}, as from
    `Footprint.parts()`)."""
    labels = list(breakdowns)
    parts = list(dict.fromkeys(p for b in breakdowns.values() for p in b))
    div, unit = byte_unit(max(sum(b.values()) for b in breakdowns.values()))
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.add_subplot()
    bottom = [0.0] * len(labels)
    for part in parts:
        values = [breakdowns[lab].get(part, 0) / div for lab in labels]
        ax.bar(labels, values, bottom=bottom, label=part, color=PART_COLOURS.get(part))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def plot_memory_vs_k(sweep: dict, *, title: str | None = None) -> Figure:
    """Lesson 05: at a fixed global batch, the floor (parameters + gradients + optimizer state,
    flat) and the saved activations on top, against k; the CUDA peak when the sweep has one."""
    k = sweep["accumulation_steps"]
    floor = sum(sweep["floor"].values())
    acts = sweep["activations"]
    peak = sweep.get("peak")
    largest = max([floor + a for a in acts] + (peak or []))
    div, unit = byte_unit(largest)
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.add_subplot()
    x = list(range(len(k)))
    ax.bar(
        x, [floor / div] * len(k), color="tab:gray", label="floor: params + grads + optimizer state"
    )
    ax.bar(
        x,
        [a / div for a in acts],
        bottom=[floor / div] * len(k),
        color="tab:red",
        label="saved activations",
    )
    if peak:
        ax.plot(
            x,
            [p / div for p in peak],
            "ko-",
            label="CUDA peak above resting (grads + activations + workspace)",
        )
    ax.set_xticks(
        x, [f"k={kk}\nmb={m}" for kk, m in zip(k, sweep["micro_sizes"], strict=True)], fontsize=7
    )
    ax.set_ylabel(unit)
    ax.set_title(
        title
        or f"global batch {sweep['global_batch']}, {sweep['optimizer']}, on {sweep['device']}",
        fontsize=10,
    )
    ax.legend(fontsize=7, loc="upper right")
    return fig


def plot_step_time(timing: dict, *, title: str | None = None) -> Figure:
    """Lesson 05: seconds per optimizer step (same global batch) against the micro-batch size."""
    fig = Figure(figsize=(7, 3.4), layout="constrained")
    ax = fig.add_subplot()
    sizes = timing["micro_sizes"]
    ms = [s * 1000 for s in timing["seconds"]]
    ax.plot(sizes, ms, "o-", color="tab:purple")
    for m, t, k in zip(sizes, ms, timing["accumulation_steps"], strict=True):
        ax.annotate(
            f"k={k}", (m, t), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("micro-batch size (log scale)")
    ax.set_ylabel("ms per optimizer step")
    ax.set_ylim(bottom=0)
    ax.set_title(
        title
        or f"time per optimizer step, global batch {timing['global_batch']}, on {timing['device']}",
        fontsize=10,
    )
    return fig


def plot_checkpointing(comparison: dict, *, title: str | None = None) -> Figure:
    """Lesson 05: saved-activation bytes (left) and ms per optimizer step (right) for plain,
    checkpointing, accumulation, and both."""
    rows = comparison["rows"]
    names = [r["name"] for r in rows]
    div, unit = byte_unit(max(r["activations"] for r in rows))
    fig = Figure(figsize=(8, 3.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.bar(names, [r["activations"] / div for r in rows], color="tab:red")
    left.set_ylabel(f"saved activations ({unit})")
    right.bar(names, [r["seconds"] * 1000 for r in rows], color="tab:purple")
    right.set_ylabel("ms per optimizer step")
    for ax in (left, right):
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    fig.suptitle(
        title or f"global batch {comparison['global_batch']} on {comparison['device']}", fontsize=10
    )
    return fig


def plot_logging_growth(runs: dict[str, dict]) -> Figure:
    """Lesson 05: graph nodes behind the running total (left) and saved bytes still alive (right)
    after each micro-step, one line per loop (from `al.memory.logging_growth`)."""
    fig = Figure(figsize=(8, 3.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    largest = max(max(r["alive_bytes"]) for r in runs.values())
    div, unit = byte_unit(max(largest, 1))
    # lines that coincide stay visible: each later line is thinner, dashed, with smaller markers
    styles = [("o", "-", 9, 3), ("s", "--", 6, 2), ("^", ":", 4, 1.5)]
    for (label, r), (marker, line, size, width) in zip(
        runs.items(), styles * len(runs), strict=False
    ):
        kw = dict(marker=marker, linestyle=line, markersize=size, linewidth=width, label=label)
        left.plot(r["micro_steps"], r["graph_nodes"], **kw)
        right.plot(r["micro_steps"], [b / div for b in r["alive_bytes"]], **kw)
    left.set_ylabel("autograd nodes behind total_loss")
    right.set_ylabel(f"saved activations alive ({unit})")
    for ax in (left, right):
        ax.set_xlabel("micro-step")
        ax.legend(fontsize=7)
    return fig


def plot_memory_explorer(data: dict) -> Figure:
    """Lesson 05's explorer: memory breakdown of the chosen micro-batch vs the whole global batch
    at once (left), and their ms per optimizer step (right)."""
    chosen, full = data["footprint"], data["full_batch"]
    k = data["accumulation_steps"]
    labels = [f"mb={data['micro_batch_size']}, k={k}", f"mb={data['global_batch']}, k=1"]
    breakdowns = {labels[0]: chosen, labels[1]: full}
    div, unit = byte_unit(max(sum(b.values()) for b in breakdowns.values()))
    fig = Figure(figsize=(9, 3.4), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    bottom = [0.0, 0.0]
    for part in chosen:
        values = [breakdowns[lab][part] / div for lab in labels]
        left.bar(labels, values, bottom=bottom, label=part, color=PART_COLOURS.get(part))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    left.set_ylabel(unit)
    left.legend(fontsize=7)
    left.set_title(
        f"memory ({data['optimizer']}{', checkpointing' if data['checkpointing'] else ''})",
        fontsize=9,
    )
    right.bar(labels, [data["seconds"] * 1000, data["full_seconds"] * 1000], color="tab:purple")
    right.set_ylabel("ms per optimizer step")
    right.set_title("time (one measurement each)", fontsize=9)
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=8)
    return fig
