"""Lesson 05's figures: pure functions, data in, matplotlib Figure out (no widget code here)."""

from __future__ import annotations

from matplotlib.figure import Figure

from . import shapes

PART_COLOURS = {
    "parameters": "tab:blue",
    "optimizer state": "tab:green",
    "gradients": "tab:orange",
    "optimizer-step temporaries": "tab:olive",
    "micro-batch data": "tab:cyan",
    "saved activations": "tab:red",
}
RESTING = ("parameters", "optimizer state")


def byte_unit(largest: float) -> tuple[float, str]:
    """(divisor, name) that shows `largest` bytes as a number between 1 and 1024."""
    for power, name in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if largest >= 1024**power:
            return 1024.0**power, name
    return 1.0, "B"


def _as_dict(fp) -> dict:
    return fp if isinstance(fp, dict) else fp.as_dict()


def moments(fp) -> dict[str, dict[str, int]]:
    """The parts alive at the two moments that bound a step's memory, from a `Footprint` (or its
    `as_dict()`): when a forward has saved its activations, and during `optimizer.step()`."""
    shapes.footprint("fp", fp)
    f = _as_dict(fp)
    resting = {"parameters": f["params"], "optimizer state": f["optimizer_state"]}
    grads = f["grads"] if f["accumulation_steps"] > 1 else 0  # from the 2nd micro-batch on
    return {
        "forward": {
            **resting,
            "gradients": grads,
            "micro-batch data": f["data"],
            "saved activations": f["activations"],
        },
        "step": {
            **resting,
            "gradients": f["grads"],
            "optimizer-step temporaries": f["step_transient"],
        },
    }


def _stacks(footprints: dict) -> tuple[float, str, list]:
    """(divisor, unit, bars): per label i and moment, the x offset and the (part, bottom,
    height) of each stacked piece in that unit, from `Footprint`s (or their `as_dict()`)."""
    bars = {label: moments(fp) for label, fp in footprints.items()}
    peaks = [_as_dict(fp).get("peak") for fp in footprints.values()]
    largest = max(
        [sum(m.values()) for b in bars.values() for m in b.values()] + [p or 0 for p in peaks]
    )
    div, unit = byte_unit(largest)
    out = []
    for i, both in enumerate(bars.values()):
        for dx, (moment, parts) in zip((-0.21, 0.21), both.items(), strict=True):
            pieces, bottom = [], 0.0
            for part, value in parts.items():
                pieces.append((part, bottom, value / div))
                bottom += value / div
            out.append((i, dx, moment, pieces))
    return div, unit, out


def _draw_footprints(ax, footprints: dict) -> tuple[float, str]:
    div, unit, stacks = _stacks(footprints)
    peaks = [_as_dict(fp).get("peak") for fp in footprints.values()]
    drawn = set()
    for i, dx, moment, pieces in stacks:
        for part, bottom, height in pieces:
            ax.bar(
                i + dx, height, 0.4, bottom=bottom, color=PART_COLOURS[part],
                label=None if part in drawn else part, gid=f"{i} {moment} {part}",
            )  # fmt: skip
            drawn.add(part)
        top = pieces[-1][1] + pieces[-1][2]
        ax.text(i + dx, top, moment, ha="center", va="bottom", fontsize=7, gid=f"{i} {moment}")
    for i, peak in enumerate(peaks):
        if peak is not None:
            ax.hlines(
                peak / div, i - 0.45, i + 0.45, colors="black", linewidth=2,
                label=None if "peak" in drawn else "measured peak of a step",
            )  # fmt: skip
            drawn.add("peak")
    ax.set_xticks(range(len(footprints)), list(footprints), fontsize=8)
    ax.set_ylabel(unit)
    return div, unit


def plot_footprint(footprints: dict, *, title: str = "What training keeps in memory") -> Figure:
    """Per label, the parts alive when a forward ends (left bar) and during optimizer.step()
    (right bar), and the measured peak (black line). `footprints` maps labels to
    `al.memory.Footprint`s (or their `as_dict()`)."""
    shapes.footprints("footprints", footprints)
    fig = Figure(figsize=(8, 3.8), layout="constrained")
    ax = fig.add_subplot()
    _draw_footprints(ax, footprints)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def plot_memory_vs_k(sweep: dict, *, title: str | None = None) -> Figure:
    """Lesson 05: at a fixed global batch, against k — bars: what exists when a forward ends
    (resting memory, gradients from the 2nd micro-batch on, the micro-batch's data and saved
    activations); dashed: what exists during optimizer.step() (the floor); dots: the measured
    peak. One baseline: zero."""
    shapes.sweep("sweep", sweep)
    k = sweep["accumulation_steps"]
    parts, acts, batch = sweep["parts"], sweep["activations"], sweep["data"]
    resting = sum(parts[p] for p in RESTING)
    grads = [parts["gradients"] if kk > 1 else 0 for kk in k]
    peaks = sweep["peak"]
    largest = max(
        [resting + g + d + a for g, d, a in zip(grads, batch, acts, strict=True)]
        + [sweep["floor"]]
        + [p for p in peaks if p is not None]
    )
    div, unit = byte_unit(largest)
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    ax = fig.add_subplot()
    x = list(range(len(k)))
    ax.bar(x, [resting / div] * len(k), color="tab:gray", label="parameters + optimizer state")
    ax.bar(
        x,
        [g / div for g in grads],
        bottom=[resting / div] * len(k),
        color="tab:orange",
        label="gradients",
    )
    ax.bar(
        x, [d / div for d in batch], bottom=[(resting + g) / div for g in grads],
        color="tab:cyan", label="micro-batch data",
    )  # fmt: skip
    ax.bar(
        x, [a / div for a in acts], bottom=[(resting + g + d) / div for g, d in zip(grads, batch)],
        color="tab:red", label="saved activations (end of a forward)",
    )  # fmt: skip
    ax.axhline(
        sweep["floor"] / div, color="black", linestyle="--", linewidth=1,
        label="during optimizer.step(): + gradients + step temporaries",
    )  # fmt: skip
    measured = [(xi, p / div) for xi, p in zip(x, peaks, strict=True) if p is not None]
    if measured:
        ax.plot(*zip(*measured, strict=True), "ko", label=f"measured peak on {sweep['device']}")
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
    shapes.timing("timing", timing)
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
    """Lesson 05: saved activations (left), the measured peak of a step (middle, resting memory
    dashed) and ms per optimizer step (right) for plain, checkpointing, accumulation, and both."""
    shapes.comparison("comparison", comparison)
    rows = comparison["rows"]
    names = [r["name"] for r in rows]
    fig = Figure(figsize=(10, 3.2), layout="constrained")
    left, middle, right = fig.subplots(1, 3)
    div, unit = byte_unit(max(r["activations"] for r in rows))
    left.bar(names, [r["activations"] / div for r in rows], color="tab:red")
    left.set_ylabel(f"saved activations ({unit})")
    div, unit = byte_unit(max(r["peak"] for r in rows))
    middle.bar(names, [r["peak"] / div for r in rows], color="tab:gray")
    middle.axhline(
        comparison["resting"] / div, color="black", linestyle=":", linewidth=1, label="resting"
    )
    if "floor" in comparison:  # no peak goes below it: where both are near it, they look equal
        middle.axhline(
            comparison["floor"] / div, color="black", linestyle="--", linewidth=1, label="floor"
        )
    middle.set_ylabel(f"measured peak of a step ({unit})")
    middle.legend(fontsize=7)
    right.bar(names, [r["seconds"] * 1000 for r in rows], color="tab:purple")
    right.set_ylabel("ms per optimizer step")
    for ax in (left, middle, right):
        ax.tick_params(axis="x", labelrotation=25, labelsize=8)
    fig.suptitle(
        title or f"global batch {comparison['global_batch']} on {comparison['device']}", fontsize=10
    )
    return fig


def plot_logging_growth(runs: dict[str, dict]) -> Figure:
    """Lesson 05: graph nodes behind the running total (left) and saved bytes still alive (right)
    after each micro-step, one line per loop (from `al.memory.logging_growth`)."""
    shapes.growth("runs", runs)
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
