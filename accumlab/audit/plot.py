"""Pure plot of an audit: when things happened, and how far each step's gradient was (lesson 08)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._validate import instance
from .findings import AuditReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FLOOR = 1e-17  # where an exact match is drawn on the log axis


def plot_audit(report: AuditReport) -> Figure:
    """Top: a timeline over micro-batches — the reference's optimizer steps against the loop's
    steps, zero_grad and scheduler calls. Bottom: each step's relative gradient error (log scale)."""
    from matplotlib.figure import Figure  # imported on first plot: `import accumlab` stays light

    instance("report", report, AuditReport, "the AuditReport al.audit(...) returns")

    fig = Figure(figsize=(8, 4.4), layout="constrained")
    top, bottom = fig.subplots(2, 1, height_ratios=[1, 1.3])
    n = report.micro_batches
    for b in range(1, n + 1):
        top.axvline(b, color="0.9", linewidth=0.8, zorder=0)
    top.scatter(
        report.expected_steps,
        [1] * len(report.expected_steps),
        marker="|",
        s=400,
        color="tab:green",
        label="reference step",
    )
    top.scatter(
        report.seen_steps,
        [0] * len(report.seen_steps),
        marker="|",
        s=400,
        color="tab:blue",
        label="your optimizer.step()",
    )
    top.scatter(
        report.zero_grads,
        [-0.3] * len(report.zero_grads),
        marker="x",
        color="tab:red",
        label="your zero_grad()",
    )
    top.scatter(
        report.scheduler_steps,
        [0.3] * len(report.scheduler_steps),
        marker=".",
        color="tab:purple",
        label="your scheduler.step()",
    )
    top.set_yticks([0, 1], ["your loop", "reference"])
    top.set_ylim(-0.7, 1.5)
    top.set_xlim(-0.5, max([n, *report.seen_steps]) + 0.5)
    top.set_xlabel("micro-batches forwarded so far")
    top.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    verdict = ", ".join(sorted(report.codes)) or "clean"
    top.set_title(f"{report.name}: {verdict}", fontsize=10)

    tolerance = report.rtol
    bottom.axhline(tolerance, color="0.5", linestyle="--", linewidth=0.8, label="match tolerance")
    for c in report.checks:
        if c.rel_error is None:  # a window the reference does not have: nothing like-for-like
            bottom.text(
                c.index,
                tolerance,
                "not\ncompared",
                ha="center",
                va="center",
                fontsize=6,
                color="0.4",
            )
            continue
        y = max(c.rel_error, FLOOR)
        good = c.explained_by is None and c.rel_error <= tolerance
        bottom.scatter([c.index], [y], color="tab:green" if good else "tab:red", zorder=3)
        if c.explained_by:
            bottom.annotate(
                c.explained_by,
                (c.index, y),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize=6,
            )
    bottom.set_yscale("log")
    bottom.set_ylim(FLOOR / 10, 1e4)
    bottom.set_xlim(-0.5, max(len(report.checks), 1) - 0.5)
    bottom.set_xticks(range(len(report.checks)))
    bottom.set_xlabel("optimizer step")
    bottom.set_ylabel("‖seen − ref‖ / ‖ref‖")
    bottom.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    if not report.checks:
        bottom.text(
            0.5,
            0.5,
            "no optimizer step to compare",
            transform=bottom.transAxes,
            ha="center",
            va="center",
        )
    return fig
