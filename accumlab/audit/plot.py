"""Pure plot of an audit: when things happened, and how far each step's gradient was (lesson 08)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._validate import instance
from .findings import AuditReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FLOOR = 1e-17  # where an exact match is drawn on the log axis
# the timeline's rows: (gid, y, marker, size, colour, label)
_EVENTS = (
    ("expected_steps", 1, "|", 400, "tab:green", "reference step"),
    ("seen_steps", 0, "|", 400, "tab:blue", "your optimizer.step()"),
    ("zero_grads", -0.3, "x", None, "tab:red", "your zero_grad()"),
    ("scheduler_steps", 0.3, ".", None, "tab:purple", "your scheduler.step()"),
)


def plot_audit(report: AuditReport) -> Figure:
    """Top: a timeline over the run's micro-batches, epoch after epoch — the reference's optimizer
    steps against the loop's steps, zero_grad and scheduler calls. Bottom: each step's relative gradient error (log scale).
    `update_audit` moves the same figure to another report (lesson 08's explorer)."""
    from matplotlib.figure import Figure  # imported on first plot: `import accumlab` stays light

    instance("report", report, AuditReport, "the AuditReport al.audit(...) returns")
    from ..figures import plain_log_ticks

    fig = Figure(figsize=(8, 4.4), layout="constrained")
    top, bottom = fig.subplots(2, 1, height_ratios=[1, 1.3])
    top.set_gid("top")
    bottom.set_gid("bottom")
    top.vlines([], -0.7, 1.5, color="0.9", linewidth=0.8, zorder=0, gid="grid")
    top.vlines([], -0.7, 1.5, color="0.4", linewidth=1.2, linestyle=":", gid="epochs")
    for gid, _, marker, size, colour, label in _EVENTS:
        top.scatter([], [], marker=marker, s=size, color=colour, label=label, gid=gid)
    top.set_yticks([0, 1], ["your loop", "reference"])
    top.set_ylim(-0.7, 1.5)
    top.set_xlabel("micro-batches forwarded so far (dotted: an epoch begins)")
    top.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), markerscale=0.5)
    top.set_title("", fontsize=10, y=1.0, gid="title")
    bottom.axhline(
        report.rtol, color="0.5", linestyle="--", linewidth=0.8, label="match tolerance", gid="rtol"
    )
    bottom.scatter([], [], zorder=3, gid="errors")
    bottom.set_yscale("log")
    bottom.set_ylim(FLOOR / 10, 1e4)
    plain_log_ticks(bottom.yaxis, [1e-16, 1e-12, 1e-8, 1e-4, 1.0, 1e4])
    bottom.set_xlabel(f"optimizer step (an exact match drawn at {FLOOR:g})")
    bottom.set_ylabel("‖seen − ref‖ / ‖ref‖")
    bottom.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    update_audit(fig, report)
    return fig


def update_audit(fig: Figure, report: AuditReport) -> None:
    """Move `plot_audit`'s figure to `report`: the same artists with new positions, colours and
    texts; the per-step notes are the only artists made anew."""
    instance("report", report, AuditReport, "the AuditReport al.audit(...) returns")
    from ..figures import named_artists

    a = named_artists(fig)
    top, bottom = a["top"], a["bottom"]
    n = report.micro_batches * report.epochs  # over the run
    a["grid"].set_segments([[(b, -0.7), (b, 1.5)] for b in range(1, n + 1)])
    starts = range(report.micro_batches, n, report.micro_batches)
    a["epochs"].set_segments([[(b + 0.5, -0.7), (b + 0.5, 1.5)] for b in starts])
    for gid, y, *_ in _EVENTS:
        xs = getattr(report, gid)
        a[gid].set_offsets([(x, y) for x in xs] or _EMPTY)
    top.set_xlim(-0.5, max([n, *report.seen_steps]) + 0.5)
    a["title"].set_text(f"{report.name}: {', '.join(sorted(report.codes)) or 'clean'}")

    for text in [t for t in bottom.texts if t.get_gid() == "note"]:
        text.remove()
    tolerance = report.rtol
    a["rtol"].set_ydata([tolerance] * 2)
    points, colours = [], []
    for c in report.checks:
        if c.rel_error is None:  # a window the reference does not have: nothing like-for-like
            bottom.text(
                c.index, tolerance, "not\ncompared", ha="center", va="center", fontsize=6,
                color="0.4", gid="note",
            )  # fmt: skip
            continue
        y = max(c.rel_error, FLOOR)
        good = c.explained_by is None and c.rel_error <= tolerance
        points.append((c.index, y))
        colours.append("tab:green" if good else "tab:red")
        if c.explained_by:
            bottom.annotate(
                c.explained_by, (c.index, y), textcoords="offset points", xytext=(0, 6),
                ha="center", fontsize=6, gid="note",
            )  # fmt: skip
    a["errors"].set_offsets(points or _EMPTY)
    a["errors"].set_facecolors(colours or "none")
    bottom.set_xlim(-0.5, max(len(report.checks), 1) - 0.5)
    bottom.set_xticks(range(len(report.checks)))
    if not report.checks:
        bottom.text(
            0.5, 0.5, "no optimizer step to compare", transform=bottom.transAxes, ha="center",
            va="center", gid="note",
        )  # fmt: skip


_EMPTY = np.empty((0, 2))  # set_offsets needs an (n, 2) array, even for no point
