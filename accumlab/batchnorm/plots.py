"""Pure plots for lesson 04 (BatchNorm under micro-batching): data in, matplotlib Figure out."""

from __future__ import annotations

from matplotlib import rcParams
from matplotlib.figure import Figure

from . import shapes

FLOOR = 1e-17  # an exact 0 cannot sit on a log axis: it is drawn here and the axis says so
MAX_CHANNELS = 4  # more channels than this turn the statistics plot into noise


def _floor(values) -> list[float]:
    return [max(float(v), FLOOR) for v in values]


def _stats_axes(ax_mean, ax_var, stats: dict, channels: int = MAX_CHANNELS) -> None:
    means, vars_ = stats["micro_means"], stats["micro_vars"]
    idx = list(range(1, len(means) + 1))
    for c in range(min(channels, means.shape[1])):
        (line,) = ax_mean.plot(idx, means[:, c].tolist(), "o", label=f"channel {c}")
        ax_mean.axhline(
            float(stats["full_mean"][c]), color=line.get_color(), linestyle="--", linewidth=1
        )
        ax_var.plot(idx, vars_[:, c].tolist(), "o", color=line.get_color())
        ax_var.axhline(
            float(stats["full_var"][c]), color=line.get_color(), linestyle="--", linewidth=1
        )
    for ax, (label, size) in zip((ax_mean, ax_var), _stats_labels(stats), strict=True):
        ax.set_ylabel(label, fontsize=size)
    for ax in (ax_mean, ax_var):
        ax.set_xlabel(f"micro-batch (size {stats['micro_batch_size']})")
    ax_mean.set_title("dots: each micro-batch; dashed: full batch", fontsize=9)
    ax_mean.legend(fontsize=7)


def plot_micro_batch_stats(stats: dict, *, channels: int = MAX_CHANNELS) -> Figure:
    """Per-micro-batch mean and variance at the first norm layer against the full batch's."""
    shapes.micro_batch_stats(stats, channels)
    fig = Figure(figsize=(9, 3.2), layout="constrained")
    ax_mean, ax_var = fig.subplots(1, 2)
    _stats_axes(ax_mean, ax_var, stats, channels)
    return fig


def plot_gradient_mismatch(
    curves: dict, *, xlabel: str = "micro-batch size", title: str = ""
) -> Figure:
    """Max relative gradient error vs the full batch, one line per label: {label: (xs, errors)}."""
    shapes.gradient_mismatch(curves, xlabel, title)
    fig = Figure(figsize=(6.5, 3.4), layout="constrained")
    ax = fig.add_subplot()
    ticks = set()
    for label, (xs, ys) in curves.items():
        ax.plot(xs, _floor(ys), marker="o", label=label)
        ticks.update(xs)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(ticks), [str(t) for t in sorted(ticks)])  # sizes, not powers of two
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("max relative error vs full batch")
    ax.set_title(
        title or f"accumulated vs full-batch gradient (an exact 0 is drawn at {FLOOR:g})",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    return fig


def plot_old_weight(
    momentum: float, matched: float, accumulation_steps: int, measured: dict
) -> Figure:
    """How much of the old running mean survives each micro-batch update, with `momentum` and with
    the matched momentum; crosses mark the values measured from the buffers ({label: (k, weight)})."""
    shapes.old_weight(momentum, matched, accumulation_steps, measured)
    fig = Figure(figsize=(6.5, 3.4), layout="constrained")
    ax = fig.add_subplot()
    j = list(range(accumulation_steps + 1))
    ax.plot(j, [(1 - momentum) ** i for i in j], marker=".", label=f"(1 − {momentum:g})^j")
    ax.plot(
        j, [(1 - matched) ** i for i in j], marker=".", label=f"(1 − {matched:.4f})^j (matched)"
    )
    ax.axhline(
        1 - momentum, color="grey", linestyle="--", linewidth=1, label="one full-batch update"
    )
    for label, (x, w) in measured.items():
        ax.plot([x], [w], "x", markersize=10, markeredgewidth=2, label=f"measured: {label}")
    ax.set_xlabel("micro-batch updates in the step j")
    ax.set_ylabel("weight of the old running mean")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7)
    return fig


def _trajectory_axes(ax, traj: dict) -> None:
    for name, style in (("accumulated", "-"), ("full", "o-")):
        xs, ys = traj[name]
        ax.plot(
            xs,
            ys,
            style,
            label=f"{name} ({traj['accumulation_steps'] if name == 'accumulated' else 1} updates/step)",
        )
    ax.axhline(
        traj["target"], color="grey", linestyle="--", linewidth=1, label="mean over the data"
    )
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(f"running_mean[{traj['channel']}]")
    ax.legend(fontsize=7)


def plot_running_trajectory(traj: dict) -> Figure:
    """One channel's running mean after every forward: accumulating vs full-batch steps."""
    shapes.trajectory(traj)
    fig = Figure(figsize=(6.5, 3.4), layout="constrained")
    _trajectory_axes(fig.add_subplot(), traj)
    return fig


def plot_training(result: dict) -> Figure:
    """Loss per optimizer step (left) and final test accuracy (right) for each training setup."""
    shapes.training(result)
    fig = Figure(figsize=(10, 3.4), layout="constrained")
    ax_loss, ax_acc = fig.subplots(1, 2, width_ratios=[3, 2])
    styles = ["-", "-", "--", ":"]
    for i, (label, losses) in enumerate(zip(result["labels"], result["losses"], strict=True)):
        ax_loss.plot(range(1, len(losses) + 1), losses, styles[i % len(styles)], label=label)
    ax_loss.set_xlabel("optimizer step")
    ax_loss.set_ylabel("training loss (as the loop saw it)")
    ax_loss.legend(fontsize=7)
    bars = ax_acc.bar(result["labels"], result["accuracy"], color="tab:blue")
    ax_acc.bar_label(bars, fmt="%.3f", fontsize=8)
    ax_acc.set_ylim(0, 1.05)
    ax_acc.set_ylabel("test accuracy (eval mode)")
    ax_acc.tick_params(axis="x", labelrotation=20, labelsize=7)
    return fig


def plot_dropout_expectation(result: dict) -> Figure:
    """Gap between the averaged accumulated and full-batch gradients vs the number of dropout draws,
    with the 1/√draws slope of averaging independent noise."""
    shapes.dropout_expectation(result)
    fig = Figure(figsize=(6.5, 3.4), layout="constrained")
    ax = fig.add_subplot()
    n, gap = result["draws"], result["rel_gap"]
    ax.loglog(n, gap, marker=".", label="measured")
    if "noise_gap" in result:  # what averaging pure noise leaves: σ/√draws
        ax.loglog(n, result["noise_gap"], "--", color="grey", label="pure noise: σ / √draws")
    else:
        ax.loglog(n, [gap[0] / d**0.5 for d in n], "--", color="grey", label="first gap / √draws")
    ax.set_xlabel("dropout draws averaged")
    ax.set_ylabel("relative L2 gap")
    ax.set_title("accumulated vs full batch with dropout: equal in expectation", fontsize=9)
    ax.legend(fontsize=8)
    return fig


EXPLORER_CHANNELS = 3  # channels the explorer's statistics panels show


def plot_batchnorm_explorer(data: dict) -> Figure:
    """Lesson 04's widget: statistics per micro-batch, the gradient error, the running mean, for
    `explore_batchnorm(...)`. A fixed layout: the explorer moves its artists with
    `update_batchnorm_explorer` (the running-mean panel is hidden while a norm keeps none)."""
    shapes.explorer(data)
    fig = Figure(figsize=(12, 3.6))
    # a fixed layout: constrained layout would re-measure every label on every redraw
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.15, top=0.83, wspace=0.38)
    ax_mean, ax_var, ax_run = fig.subplots(1, 3)
    for ax, name in ((ax_mean, "means"), (ax_var, "vars"), (ax_run, "running")):
        ax.set_gid(name)
    for c in range(EXPLORER_CHANNELS):
        (dots,) = ax_mean.plot([], [], "o", label=f"channel {c}", gid=f"mean {c}")
        colour = dots.get_color()
        ax_mean.axhline(0, color=colour, linestyle="--", linewidth=1, gid=f"full mean {c}")
        ax_var.plot([], [], "o", color=colour, gid=f"var {c}")
        ax_var.axhline(0, color=colour, linestyle="--", linewidth=1, gid=f"full var {c}")
    # one row above the dots (the y limits leave it room); a fixed place: "best" searches anew on
    # every draw
    ax_mean.legend(fontsize=7, loc="upper center", ncol=EXPLORER_CHANNELS)
    ax_mean.set_title("dots: each micro-batch; dashed: full batch", fontsize=9, y=1.0)
    ax_run.plot([], [], "-", gid="accumulated")
    ax_run.plot([], [], "o-", gid="full")
    ax_run.axhline(0, color="grey", linestyle="--", linewidth=1, gid="target")
    ax_run.legend(
        [*ax_run.get_lines()], ["", "full (1 update/step)", "mean over the data"], fontsize=7
    ).set_gid("running legend")
    ax_run.set_xlabel("optimizer step")
    ax_run.set_title("", fontsize=9, y=1.0, gid="momentum")
    ax_run.text(
        0.5, 0.5, "", ha="center", va="center", transform=ax_run.transAxes, gid="no running"
    )
    fig.suptitle("", fontsize=9, gid="diff")
    update_batchnorm_explorer(fig, data)
    return fig


def update_batchnorm_explorer(fig: Figure, data: dict) -> None:
    """Move `plot_batchnorm_explorer`'s dots, lines, labels and limits to `data`
    (`explore_batchnorm(...)`)."""
    shapes.explorer(data)
    from ..figures import named_artists

    a = named_artists(fig)
    stats = data["stats"]
    means, vars_ = stats["micro_means"], stats["micro_vars"]
    idx = list(range(1, len(means) + 1))
    for c in range(EXPLORER_CHANNELS):
        shown = c < means.shape[1]  # a model with fewer channels leaves the rest hidden
        for name in (f"mean {c}", f"full mean {c}", f"var {c}", f"full var {c}"):
            a[name].set_visible(shown)
        if shown:
            a[f"mean {c}"].set_data(idx, means[:, c].tolist())
            a[f"full mean {c}"].set_ydata([float(stats["full_mean"][c])] * 2)
            a[f"var {c}"].set_data(idx, vars_[:, c].tolist())
            a[f"full var {c}"].set_ydata([float(stats["full_var"][c])] * 2)
    for name, (label, size) in zip(("means", "vars"), _stats_labels(stats), strict=True):
        ax = a[name]
        ax.set_ylabel(label, fontsize=size)
        ax.set_xlabel(f"micro-batch (size {stats['micro_batch_size']})")
        ax.set_xlim(0.5, len(idx) + 0.5)
        ax.set_xticks(idx[:: -(-len(idx) // 8)])
        ax.relim(visible_only=True)
        low, high = ax.dataLim.intervaly
        pad = 0.05 * (high - low) if high > low else 1.0
        # above the means: room for the legend's row
        ax.set_ylim(low - pad, high + (6 if name == "means" else 1) * pad)
    a["diff"].set_text(f"norm={data['norm']}: accumulated vs full-batch gradient — {data['diff']}")
    traj, run = data["trajectory"], a["running"]
    kept = traj is not None
    if kept:
        run.set_axis_on()
    else:
        run.set_axis_off()
    for name in ("accumulated", "full", "target", "running legend"):
        a[name].set_visible(kept)
    a["no running"].set_text("" if kept else f"norm={data['norm']!r} keeps\nno running statistics")
    a["momentum"].set_text(f"momentum {data['momentum']:g}" if kept else "")
    if kept:
        a["accumulated"].set_data(*traj["accumulated"])
        a["full"].set_data(*traj["full"])
        a["target"].set_ydata([traj["target"]] * 2)
        legend = a["running legend"]
        k = traj["accumulation_steps"]
        legend.get_texts()[0].set_text(f"accumulated ({k} update{'s' if k > 1 else ''}/step)")
        # the curves start at 0 and head for the target: the legend goes to the other side
        legend.set_loc("upper right" if traj["target"] < 0 else "lower right")
        run.set_ylabel(f"running_mean[{traj['channel']}]")
        run.relim(visible_only=True)
        run.autoscale_view()


def _stats_labels(stats: dict) -> list[tuple[str, str | int]]:
    """(ylabel, font size) of the mean and the variance panel: what the numbers are."""
    if stats.get("used_by_layer", True):
        size = rcParams["axes.labelsize"]  # given: a label set before may have had another
        return [("mean BatchNorm uses", size), ("variance BatchNorm uses", size)]
    # LayerNorm / GroupNorm normalise each sample on its own: these numbers are not used
    where = stats.get("layer", "norm layer")
    return [
        (f"micro-batch {what} at {where} input\n(not used by {where})", 8)
        for what in ("mean", "variance")
    ]
