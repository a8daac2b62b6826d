"""Lesson 03's pure plots: per-sample and per-token weights, per-window gradient errors, training
curves per normalisation; and lesson 13's linear-scaling gap. Data in, matplotlib Figure out; never
pyplot state.
"""

from __future__ import annotations

import torch
from matplotlib import colormaps
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from . import shapes

FLOOR = 1e-17  # errors below this are drawn at the floor: a log axis cannot show 0
# the explorer's token-weight ratio: a fixed log scale from ×1/RATIO_SPAN to ×RATIO_SPAN, 1 white
RATIO_SPAN = 4.0
RATIO_FLOOR = 1e-6  # a weight of 0 (dropped) is drawn as this: below the scale, "under" colour
RATIO_TICKS = [0.25, 0.5, 1.0, 2.0, 4.0]
RATIO_LABELS = {0.25: "≤ 1/4", 0.5: "1/2", 1.0: "1 exact", 4.0: "≥ 4"}
RATIO_CMAP = colormaps["bwr"].with_extremes(under="navy", over="darkred")


def plot_sample_weights(weights: dict, *, title: str | None = None) -> Figure:
    """Lesson 03. One row per policy: each sample's weight in the epoch's update (bars) against the
    full-batch weight 1/N of its window (black steps). Dropped samples are hatched."""
    shapes.sample_weights(weights, title)
    fig = Figure(figsize=(8, 1.2 + 1.5 * len(weights)), layout="constrained")
    axes = fig.subplots(len(weights), 1, sharex=True, squeeze=False)[:, 0]
    top = max(float(torch.maximum(w.per_item, w.reference).max()) for w in weights.values())
    for ax, (label, w) in zip(axes, weights.items(), strict=True):
        n = len(w.per_item)
        xs = list(range(n))
        colours = ["tab:blue" if k else "white" for k in w.kept.tolist()]
        ax.bar(
            xs,
            w.per_item.tolist(),
            color=colours,
            edgecolor="tab:blue",
            hatch=None,
            label="weight in the update",
        )
        for x, kept in zip(xs, w.kept.tolist(), strict=True):
            if not kept:
                ax.bar(
                    x,
                    w.reference[x].item(),
                    color="none",
                    edgecolor="tab:red",
                    hatch="//",
                    linewidth=0,
                )
        ax.step(
            [x - 0.5 for x in xs] + [n - 0.5],
            w.reference.tolist() + [w.reference[-1].item()],
            where="post",
            color="black",
            linewidth=1.2,
            label="full batch over the window",
        )
        for b in range(1, n):
            if w.window[b] != w.window[b - 1]:
                ax.axvline(b - 0.5, color="grey", linestyle=":", linewidth=1)
        ax.set_ylim(0, top * 1.15)
        ax.set_ylabel("weight", fontsize=8)
        ax.set_title(label, fontsize=9, loc="left")
    # outside every panel: inside one it would hide the bars or the step it explains
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=7, loc="outside upper right", ncol=2)
    axes[-1].set_xlabel("sample (dotted lines: window boundaries; red hatch: dropped)")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))  # samples are whole numbers
    if title:
        fig.suptitle(title, fontsize=10, x=0.02, ha="left")
    return fig


def _masked(matrix: torch.Tensor, lengths):
    """The (sequences, positions) matrix with padding masked: shown as background, not as 0."""
    import numpy as np

    values = matrix.numpy().copy()
    real = np.arange(values.shape[1])[None, :] < np.asarray(lengths)[:, None]
    return np.ma.masked_where(~real, values)


def _heatmap(ax, matrix: torch.Tensor, lengths, micro_batch_size: int, norm=None, cmap="viridis"):
    ax.set_facecolor("0.85")
    image = ax.imshow(
        _masked(matrix, lengths), aspect="auto", interpolation="nearest", norm=norm, cmap=cmap
    )
    for row in range(micro_batch_size, len(lengths), micro_batch_size):
        ax.axhline(row - 0.5, color="white", linewidth=1.5)
    ax.set_xlabel("token position (grey: padding, label -100)")
    return image


def plot_token_weights(
    panels: dict, lengths, *, micro_batch_size: int = 1, title: str | None = None
) -> Figure:
    """Lesson 03. Side-by-side heatmaps of per-token weights (rows: sequences; white lines separate
    micro-batches), on one colour scale so equal colours mean equal weights."""
    lengths = shapes.token_weights(panels, lengths, micro_batch_size, title)
    fig = Figure(figsize=(4.2 * len(panels), 3.6), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    vmax = max(float(m.max()) for m in panels.values())
    from matplotlib.colors import Normalize

    norm = Normalize(vmin=0.0, vmax=vmax)
    image = None
    for ax, (label, matrix) in zip(axes, panels.items(), strict=True):
        image = _heatmap(ax, matrix, lengths, micro_batch_size, norm=norm)
        ax.set_title(label, fontsize=9)
    axes[0].set_ylabel("sequence")
    fig.colorbar(image, ax=list(axes), label="weight per token")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def _error_bars(ax, checks) -> None:
    labels = [f"w{c.window}\n{c.stop - c.start} smp" for c in checks]
    values = [max(c.max_rel, FLOOR) for c in checks]
    ax.bar(labels, values, color=_colours(checks))
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 2, 10)
    ax.axhline(1e-12, color="black", linestyle="--", linewidth=1)
    ax.set_ylabel("max relative error vs full batch")
    ax.tick_params(axis="x", labelsize=7)


def plot_window_errors(checks, *, title: str = "") -> Figure:
    """Lesson 03. Each window's gradient error vs the full batch over its samples (log scale; dashed:
    1e-12; green: exact to float64 round-off, red: wrong, grey: dropped)."""
    shapes.window_errors(checks, title)
    fig = Figure(figsize=(6, 3.2), layout="constrained")
    ax = fig.add_subplot()
    _error_bars(ax, checks)
    ax.set_title(title, fontsize=10)
    return fig


def plot_linear_scaling_gap(rows, *, title: str = "") -> Figure:
    """Lesson 13. Relative parameter gap: k small SGD steps at lr η vs one accumulated step at k·η."""
    shapes.linear_scaling_gap(rows, title)
    fig = Figure(figsize=(5.5, 3.4), layout="constrained")
    ax = fig.add_subplot()
    lrs = [r["lr"] for r in rows]
    ax.loglog(lrs, [r["relative_gap"] for r in rows], marker="o", label="measured")
    ax.loglog(
        lrs,
        [rows[0]["relative_gap"] * lr / lrs[0] for lr in lrs],
        linestyle="--",
        color="grey",
        label="∝ η (first-order agreement)",
    )
    ax.set_xlabel("learning rate η of the small steps")
    ax.set_ylabel("‖θ_small − θ_big‖ / ‖step‖")
    ax.legend(fontsize=8)
    ax.set_title(title or "linear scaling rule: exact only as η → 0", fontsize=10)
    return fig


def plot_token_training(curves: dict, *, title: str = "") -> Figure:
    """Lesson 03. The token-mean loss over the whole data after each epoch, for each way of
    normalising (`al.scaling.token_training`): the full batch dashed, drawn on top of the wide
    global-count line, so where they agree the dashes run along the green band."""
    shapes.token_training(curves, title)
    fig = Figure(figsize=(6, 3.2), layout="constrained")
    ax = fig.add_subplot()
    style = {
        "full batch": {"color": "black", "linestyle": "--", "linewidth": 2.5, "zorder": 3},
        "global count": {"color": "tab:green", "linewidth": 4, "alpha": 0.6},
        "mean of means": {"color": "tab:red", "linewidth": 1.5},
    }
    for way, kw in style.items():
        ax.plot(curves["epoch"], curves[way], label=way, **kw)
    ax.set_xlabel("epoch")
    ax.set_ylabel("token-mean loss, all data")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(title or "same start, same windows: three normalisations", fontsize=10)
    return fig


def plot_scaling_explorer(data: dict) -> Figure:
    """Lesson 03's explorer: per-window gradient errors (left, each labelled with its value) and
    each token's weight divided by its full-batch weight (right, on a fixed log scale: white =
    exact, blue = under-weighted, red = over-weighted, saturating beyond ×1/4 and ×4; navy also
    marks a dropped token), for
    `loss_scaling_data(...)`. A fixed layout with plain tick labels: the explorer moves its
    artists with `update_scaling_explorer`."""
    shapes.explorer(data)
    from ..figures import plain_log_ticks

    fig = Figure(figsize=(10, 3.8))
    fig.subplots_adjust(left=0.08, right=0.9, bottom=0.2, top=0.9, wspace=0.25)
    left, right = fig.subplots(1, 2, width_ratios=[1, 1.4])
    left.set_gid("errors")
    right.set_gid("weights")
    left.set_yscale("log")
    left.set_ylim(FLOOR / 2, 10)
    # plain labels: log-scale labels are mathtext ($10^{-8}$), laid out again on every draw
    plain_log_ticks(left.yaxis, [10.0**e for e in range(-16, 5, 4)])
    left.axhline(1e-12, color="black", linestyle="--", linewidth=1)
    left.set_ylabel("max relative error vs full batch")
    left.tick_params(axis="x", labelsize=7)
    # y given: the title stays put instead of being re-placed after measuring the tick labels
    left.set_title("", fontsize=9, y=1.0, gid="errors title")
    right.set_facecolor("0.85")  # padding (masked) shows as this background, not as weight 0
    # one fixed scale for every setting, log-symmetric around 1 (white: exact): ×2 too much and
    # ×2 too little are equally strong, and beyond ×4 either way the end colours saturate
    image = right.imshow(
        [[1.0]], aspect="auto", interpolation="nearest", cmap=RATIO_CMAP,
        norm=LogNorm(vmin=1 / RATIO_SPAN, vmax=RATIO_SPAN), gid="ratio",
    )  # fmt: skip
    right.yaxis.set_major_locator(MaxNLocator(integer=True))  # sequences are whole numbers
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.hlines([], 0, 1, colors="white", linewidth=1.5, gid="micro-batches")
    right.hlines([], 0, 1, colors="black", linewidth=2, gid="windows")
    right.set_xlabel("token position (grey: padding, label -100)")
    right.set_ylabel("sequence (white: micro-batches, black: windows)", fontsize=8)
    right.set_title("token weight ÷ full-batch weight of its window", fontsize=9, y=1.0)
    box = right.get_position()
    bar = fig.colorbar(
        image, cax=fig.add_axes((box.x1 + 0.015, box.y0, 0.012, box.height)), extend="both"
    )
    bar.set_ticks(RATIO_TICKS, labels=[RATIO_LABELS.get(t, f"{t:g}") for t in RATIO_TICKS])
    bar.minorticks_off()
    update_scaling_explorer(fig, data)
    return fig


def update_scaling_explorer(fig: Figure, data: dict) -> None:
    """Redraw `plot_scaling_explorer`'s bars and move its heatmap, separators, colour scale and
    title to `data` (`loss_scaling_data(...)`)."""
    shapes.explorer(data)
    from ..figures import named_artists

    a = named_artists(fig)
    left, right = a["errors"], a["weights"]
    checks, recipe, lengths = data["checks"], data["recipe"], data["lengths"]
    for bars in list(left.containers):  # the number of windows changes with the sliders
        bars.remove()
    heights = [max(c.max_rel, FLOOR) for c in checks]
    left.bar(range(len(checks)), heights, color=_colours(checks))
    left.set_ylim(FLOOR / 2, max(10.0, 3 * max(heights)))  # the tallest bar is never cut off
    # at most 8 labels: more would overlap; with few windows each also says how many samples
    every = -(-len(checks) // 8)
    left.set_xticks(
        range(0, len(checks), every),
        [
            f"w{c.window}\n{c.stop - c.start} smp\n{c.max_rel:.1e}"
            if every == 1
            else f"w{c.window}"
            for c in checks[::every]
        ],
    )
    left.set_xlim(-0.6, len(checks) - 0.4)
    a["errors title"].set_text(
        f"{recipe.normalization}, {recipe.last_window}: gradient error per window"
    )
    ratio = data["ratio"]
    rows, columns = ratio.shape
    # a dropped token weighs 0: drawn in the "under" colour (a log scale cannot place 0)
    a["ratio"].set_data(_masked(ratio.clamp(min=RATIO_FLOOR), lengths))
    a["ratio"].set_extent((-0.5, columns - 0.5, rows - 0.5, -0.5))
    right.set_xlim(-0.5, columns - 0.5)
    right.set_ylim(rows - 0.5, -0.5)
    windows = data["weights"].window.tolist()
    across = (-0.5, columns - 0.5)
    a["micro-batches"].set_segments(
        [
            [(x, r - 0.5) for x in across]
            for r in range(recipe.micro_batch_size, rows, recipe.micro_batch_size)
        ]
    )
    a["windows"].set_segments(
        [
            [(x, r - 0.5) for x in across]
            for r in range(1, len(windows))
            if windows[r] != windows[r - 1]
        ]
    )


def _colours(checks) -> list[str]:
    # green: exact to float64 round-off; grey: a dropped window; red: wrong
    return [
        "tab:green" if c.max_rel <= 1e-12 else ("tab:grey" if not c.kept else "tab:red")
        for c in checks
    ]
