"""Lesson 13's explorer figure: steps and samples to the target against B = b·k, with the current
setting and the two-batch noise scale marked, and, at that B, the passes every split b × k costs.
Pure: data in, Figure out; `update_batch_explorer` moves the artists `plot_batch_explorer` made (no
new axes, no re-layout); `batch_explorer_caption` is the line of text shown above the figure."""

from __future__ import annotations

import math

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from .._validate import result
from .shapes import SWEEP, nonempty

EXPLORER = {
    "micro_batch_size": int,
    "accumulation_steps": int,
    "batch": int,
    "steps": float,
    "samples": float,
    "passes": float,
    "split_sizes": nonempty([int]),
    "split_passes": nonempty([float]),
    "measured_b_simple": (float, type(None)),
    "estimate_samples": int,
    "exact_b_simple": float,
}


def _data(value) -> dict:
    return result("data", value, EXPLORER, "what al.scale.explore_batch(...) returns")


def plot_batch_explorer(sweep: dict, data: dict) -> Figure:
    """Left: optimizer steps to the target against B; middle: samples processed. The
    sweep's points, the current B, the exact B_simple and the measured one. Right: at the current
    B, steps and forward-backward passes against the micro-batch size b."""
    result("sweep", sweep, SWEEP, "what al.scale.batch_size_sweep(...) returns")
    _data(data)
    fig = Figure(figsize=(12, 3.5))
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.16, top=0.84, wspace=0.3)
    bs = sweep["batch_sizes"]
    ticks = [b for b in bs if b & (b - 1) == 0][::2]
    for ax, key, label, corner in (
        (fig.add_subplot(1, 3, 1), "steps", "optimizer steps to the target", "upper right"),
        (fig.add_subplot(1, 3, 2), "samples", "samples to the target", "upper left"),
    ):
        ax.plot(bs, sweep[key], "o-", color="grey", markersize=4, label="sweep")
        ax.plot([], [], "o", color="tab:red", markersize=10, gid=f"{key}_point", label="B = b·k")
        ax.axvline(data["exact_b_simple"], color="black", linestyle=":", label="exact B_simple")
        # hidden at k = 1 (one batch size: no two-batch estimate), which the caption says
        ax.axvline(1, color="tab:red", linestyle="--", gid=f"{key}_measured",
                   label="measured B_simple (b, k·b)")  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        # fixed plain ticks: a log locator's mathtext labels are re-laid out on every draw
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(bs[0] / 1.5, bs[-1] * 1.5)
        finite = [v for v in sweep[key] if math.isfinite(v) and v > 0]
        low, high = min(finite) / 1.5, max(finite) * 1.5
        ax.set_ylim(low, high)
        _plain_log_y(ax, low, high)
        ax.set_xlabel("effective batch B = b × k")
        ax.set_ylabel(label, fontsize=9)
        ax.legend(fontsize=7, loc=corner)  # the corner the curve leaves empty
    _splits_panel(fig.add_subplot(1, 3, 3), sweep)
    fig.suptitle("", fontsize=9, y=0.96, gid="title")
    update_batch_explorer(fig, data)
    return fig


def _plain_log_y(ax, low: float, high: float) -> None:
    decades = [10.0**e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)]
    ax.set_yticks(decades, [f"{d:g}" for d in decades])  # plain labels, no mathtext
    ax.yaxis.set_minor_locator(NullLocator())


def _splits_panel(ax, sweep: dict) -> None:
    """At the current B, against b: the optimizer steps (the same for every split) and the
    forward-backward passes (steps × B/b) that run one after another on one device."""
    from .tradeoff_explorer import SIZES

    ax.plot([], [], "s--", color="grey", markersize=4, gid="split_steps", label="optimizer steps")
    ax.plot([], [], "o-", color="tab:blue", markersize=4, gid="split_passes",
            label="forward-backward passes")  # fmt: skip
    ax.plot([], [], "o", color="tab:red", markersize=10, gid="split_point", label="this b")
    ax.plot([], [], "o", color="tab:red", markersize=10, gid="split_step_point")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(SIZES), [str(m) for m in SIZES])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(SIZES[0] / 1.5, SIZES[-1] * 1.5)
    # the most passes a slider setting can cost: k ≤ the largest slider value
    top = max(s * min(bs, SIZES[-1]) for bs, s in zip(sweep["batch_sizes"], sweep["steps"]))
    finite = [v for v in sweep["steps"] if math.isfinite(v) and v > 0]
    low = min(finite) / 1.5
    ax.set_ylim(low, max(top, low * 2) * 1.5)
    _plain_log_y(ax, low, max(top, low * 2) * 1.5)
    ax.set_title("", fontsize=9, gid="split_title")
    ax.set_xlabel("micro-batch size b, at this B")
    ax.set_ylabel("to the target, at this B", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")


def update_batch_explorer(fig: Figure, data: dict) -> None:
    """Move `plot_batch_explorer`'s artists to `data`."""
    _data(data)
    from ..figures import named_artists

    a = named_artists(fig)
    measured = data["measured_b_simple"]
    sizes = data["split_sizes"]
    a["split_passes"].set_data(sizes, data["split_passes"])
    a["split_steps"].set_data(sizes, [data["steps"]] * len(sizes))
    a["split_point"].set_data([data["micro_batch_size"]], [data["passes"]])
    a["split_step_point"].set_data([data["micro_batch_size"]], [data["steps"]])
    a["split_title"].set_text(f"every split b × B/b of B = {data['batch']}")
    for key in ("steps", "samples"):
        a[f"{key}_point"].set_data([data["batch"]], [data[key]])
        line = a[f"{key}_measured"]
        line.set_visible(measured is not None)
        if measured is not None:
            line.set_xdata([measured, measured])
    a["title"].set_text(
        f"b = {data['micro_batch_size']}, k = {data['accumulation_steps']} → B = {data['batch']}: "
        f"{data['steps']:.1f} steps, {data['samples']:.0f} samples, run as "
        f"{data['passes']:.0f} forward-backward passes of {data['micro_batch_size']} rows"
    )


def batch_explorer_caption(data: dict) -> str:
    """The noise scale this b and k measure, as HTML above the figure (text there costs no
    figure layout): the red dashed line's value, or why there is none."""
    _data(data)
    measured, b, big = data["measured_b_simple"], data["micro_batch_size"], data["batch"]
    if measured is not None:
        return (
            f"Red dashed: B_simple measured from b = {b} and k·b = {big} "
            f"({data['estimate_samples']:,} samples): <b>{measured:.0f}</b>; exact (dotted) "
            f"{data['exact_b_simple']:.0f}"
        )
    if data["accumulation_steps"] == 1:
        return "k = 1: one batch size only, no two-batch estimate (no red dashed line)"
    return "two-batch estimate not resolved: |G|² averaged ≤ 0 (too noisy at this b, k)"
