"""Pure plots for lesson 04 (BatchNorm under micro-batching): data in, matplotlib Figure out."""

from __future__ import annotations

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
    if stats.get("used_by_layer", True):
        ax_mean.set_ylabel("mean BatchNorm uses")
        ax_var.set_ylabel("variance BatchNorm uses")
    else:  # LayerNorm / GroupNorm normalise each sample on its own: these numbers are not used
        where = stats.get("layer", "norm layer")
        ax_mean.set_ylabel(f"micro-batch mean at {where} input\n(not used by {where})", fontsize=8)
        ax_var.set_ylabel(
            f"micro-batch variance at {where} input\n(not used by {where})", fontsize=8
        )
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
    ax.loglog(n, [gap[0] / d**0.5 for d in n], "--", color="grey", label="first gap / √draws")
    ax.set_xlabel("dropout draws averaged")
    ax.set_ylabel("relative L2 gap")
    ax.set_title("accumulated vs full batch with dropout: equal in expectation", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def plot_batchnorm_explorer(data: dict) -> Figure:
    """Lesson 04's widget: statistics per micro-batch, the gradient error, the running mean."""
    shapes.explorer(data)
    # a fixed layout: the explorer redraws this figure on every change, and constrained layout
    # would re-measure every label each time
    fig = Figure(figsize=(12, 3.6))
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.15, top=0.83, wspace=0.38)
    ax_mean, ax_var, ax_run = fig.subplots(1, 3)
    _stats_axes(ax_mean, ax_var, data["stats"], channels=3)
    fig.suptitle(
        f"norm={data['norm']}: accumulated vs full-batch gradient — {data['diff']}", fontsize=9
    )
    if data["trajectory"] is None:
        ax_run.text(
            0.5,
            0.5,
            f"norm={data['norm']!r} keeps\nno running statistics",
            ha="center",
            va="center",
        )
        ax_run.set_axis_off()
    else:
        _trajectory_axes(ax_run, data["trajectory"])
        ax_run.set_title(f"momentum {data['momentum']:g}", fontsize=9)
    return fig
