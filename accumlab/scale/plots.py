"""Lessons 12 and 13: pure plots: data in, matplotlib Figure out (no widget code, no pyplot state)."""

from __future__ import annotations

import math

from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator, NullLocator

from ..figures import plain_log_ticks
from . import shapes

STAGE_COLORS = {"F": "tab:blue", "B": "tab:orange"}


def _coinciding(errors: dict) -> list[list[str]]:
    """Accumulator names grouped by identical error curves, in order: one line is drawn per group,
    since curves that coincide exactly would hide each other."""
    groups: list[list[str]] = []
    for name, values in errors.items():
        same = [g for g in groups if errors[g[0]] == values]
        if same:
            same[0].append(name)
        else:
            groups.append([name])
    return groups


def plot_accumulators(sweep: dict, *, title: str = "") -> Figure:
    """Relative error against float64 of the accumulated gradient, per accumulator, vs k.
    Accumulators whose errors are identical share one line and one legend entry."""
    shapes.accumulators("sweep", sweep)
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.add_subplot()
    n = sweep["parameters"]
    styles = [("-", "o", 7), ("--", "s", 7), ("-.", "D", 5), (":", "^", 4)]
    for names, (dash, marker, size) in zip(_coinciding(sweep["errors"]), styles * 2):
        held = [sum(sweep["bytes"][name].values()) / n for name in names]
        label = "\n= ".join(f"{name} ({b:.0f} bytes/parameter)" for name, b in zip(names, held))
        ax.plot(
            sweep["ks"],
            sweep["errors"][names[0]],
            linestyle=dash,
            marker=marker,
            markersize=size,
            label=label + (": one line" if len(names) > 1 else ""),
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("micro-batches accumulated k (loss / k each)")
    ax.set_ylabel("relative L2 error vs float64")
    ax.set_title(title or "Where the running sum lives decides the error", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def _draw_spans(ax, spans, *, labels: bool) -> None:
    for s, stage in enumerate(spans):
        for kind, j, start, end in stage:
            ax.broken_barh(
                [(start, end - start)],
                (s - 0.4, 0.8),
                facecolors=STAGE_COLORS[kind],
                edgecolor="white",
            )
            if labels:
                ax.text((start + end) / 2, s, str(j), ha="center", va="center", fontsize=7)
    ax.set_yticks(range(len(spans)), [f"stage {s}" for s in range(len(spans))])
    ax.invert_yaxis()
    ax.set_xlabel("time (t_F = 1, t_B = 2)")


def plot_schedules(replays: dict, *, title: str = "") -> Figure:
    """One timeline per schedule: blue forward, orange backward passes, numbered by micro-batch."""
    shapes.replays("replays", replays)
    fig = Figure(figsize=(9, 1.2 + 1.1 * len(replays)), layout="constrained")
    axes = fig.subplots(len(replays), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (name, rep) in zip(axes, replays.items()):
        _draw_spans(ax, rep["spans"], labels=True)
        ax.set_title(f"{name}: bubble {rep['bubble'][0]:.0%} of the step", fontsize=9, loc="left")
    key = [Patch(color=STAGE_COLORS[k], label=w) for k, w in (("F", "forward"), ("B", "backward"))]
    axes[0].legend(handles=key, fontsize=7, loc="upper right", ncols=2)
    fig.suptitle(title or "torch's pass orders replayed on a clock", fontsize=10)
    return fig


def plot_bubble(curves: dict, recorded: dict | None = None, *, title: str = "") -> Figure:
    """Bubble vs micro-batches m: the formula (lines), the replayed GPipe order (dots), and the
    orders recorded from the two-process run (crosses)."""
    shapes.curves("curves", curves, recorded)
    fig = Figure(figsize=(7, 3.4), layout="constrained")
    ax = fig.add_subplot()
    ms = curves["micro_batches"]
    for s, formula in curves["formula"].items():
        (line,) = ax.plot(ms, formula, label=f"S = {s}: (S−1)/(m+S−1)")
        ax.plot(ms, curves["replayed"][s], "o", color=line.get_color(), markersize=4)
    ax.plot([], [], "o", color="grey", markersize=4, label="replayed GPipe order")
    if recorded:
        ax.plot(
            list(recorded), list(recorded.values()), "kx", markersize=9, label="recorded, S = 2"
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("micro-batches per step m")
    ax.set_ylabel("idle share of the step")
    ax.set_title(title or "The bubble shrinks as micro-batches grow", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def plot_step_weights(experiments: dict, names, *, title: str = "") -> Figure:
    """Bars: the weight each optimizer step's gradient got in the final .grad, per experiment."""
    names = shapes.step_weights(experiments, names)
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / max(len(experiments[n]["weights"]["weights"]) for n in names)
    labelled = set()
    for i, name in enumerate(names):
        weights = experiments[name]["weights"]["weights"]
        for j, w in enumerate(weights):
            label = None if j in labelled else f"step {j + 1}'s gradient"
            labelled.add(j)
            ax.bar(i + (j - (len(weights) - 1) / 2) * width, w, width, color=f"C{j}", label=label)
            ax.text(
                i + (j - (len(weights) - 1) / 2) * width,
                w,
                f"{w:.3g}",
                ha="center",
                va="bottom",
                fontsize=8,
            )
    ax.axhline(1, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("weight in the final .grad")
    ax.set_title(title or "What each pipeline step contributes", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def plot_recompiles(results: dict, *, title: str = "") -> Figure:
    """Bars: graphs compiled per fix, dynamic ones hatched."""
    shapes.recompiles("results", results)
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.add_subplot()
    for i, r in enumerate(results.values()):
        bottom = 0
        for dynamic in r["dynamic"]:
            ax.bar(
                i,
                1,
                bottom=bottom,
                color="tab:purple" if dynamic else "tab:blue",
                edgecolor="white",
                hatch="//" if dynamic else None,
            )
            bottom += 1
    ax.set_xticks(range(len(results)), list(results), fontsize=8)
    ax.set_yticks(range(max(len(r["dynamic"]) for r in results.values()) + 1))
    ax.set_ylabel("graphs compiled")
    tallest = max(len(r["dynamic"]) for r in results.values())
    ax.set_ylim(0, tallest + 0.9)  # room above the bars for the legend
    key = [
        Patch(facecolor="tab:blue", label="static batch size"),
        Patch(facecolor="tab:purple", hatch="//", edgecolor="white", label="dynamic batch size"),
    ]
    ax.legend(handles=key, fontsize=8, loc="upper right", ncols=2)
    ax.set_title(title or "Graphs compiled (hatched: dynamic batch size)", fontsize=10)
    return fig


def plot_batch_sweep(
    sweep: dict, fitted: dict, curve: dict, b_simple: float, *, title=""
) -> Figure:
    """Steps and samples to the target loss vs batch size (log-log), the fitted McCandlish curves,
    and B_simple measured at the target loss."""
    shapes.batch_sweep(sweep, fitted, curve, b_simple)
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    a, b = fig.subplots(1, 2)
    bs = sweep["batch_sizes"]
    for ax, key, label in (
        (a, "steps", "optimizer steps"),
        (b, "samples", "samples processed"),
    ):
        ax.plot(bs, sweep[key], "o", label="measured (best learning rate)")
        ax.plot(curve["batch_sizes"], curve[key], "-", color="grey", label="fit: S_min, E_min")
        ax.axvline(b_simple, color="tab:red", linestyle="--", label=f"B_simple = {b_simple:.0f}")
        ax.axvline(
            fitted["b_crit"],
            color="black",
            linestyle=":",
            label=f"B_crit fit = {fitted['b_crit']:.0f}",
        )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("effective batch B = micro-batch × k")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    a.set_title("steps to the target: fall ~1/B, then flatten", fontsize=10)
    b.set_title("samples to the target: slow growth, then faster", fontsize=10)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def plot_scale_explorer(data: dict, *, errors: dict | None = None) -> Figure:
    """Lesson 12's explorer figure for `explorer_data(...)`: the pipeline's timeline (left), the
    bubble formula against m (middle) and, given `al.scale.accumulator_errors(...)` as `errors`,
    the accumulation error against k = m (right). A fixed layout and fixed limits where possible;
    the explorer moves its artists with `update_scale_explorer`."""
    shapes.explorer("data", data)
    if errors is not None:
        shapes.accumulators("errors", errors)
    fig = Figure(figsize=(11, 3.4))
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.16, top=0.88, wspace=0.3)
    timeline, curve, precision = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.6, 1, 1]})
    timeline.set_gid("timeline")
    curve.set_gid("curve")
    for kind in ("F", "B"):
        timeline.add_collection(
            # no edge: at large S × m a pass is under a pixel wide, and an edge would cover it
            PolyCollection([], facecolors=STAGE_COLORS[kind], linewidths=0, gid=kind)
        )
    timeline.set_xlabel("time (t_F = 1, t_B = 2)")
    timeline.xaxis.set_major_locator(MaxNLocator(6, integer=True))  # each tick label costs a layout
    # titles given a y: they stay put, instead of being re-placed after measuring the tick labels
    for ax in (timeline, curve, precision):
        ax.set_title("", fontsize=9, y=1.0)
    timeline.text(
        0.5, 0.5, "", ha="center", va="center", wrap=True, transform=timeline.transAxes,
        fontsize=9, gid="message",
    )  # fmt: skip
    ms = list(range(1, len(data["formula_curve"]) + 1))
    curve.plot(ms, [0.0] * len(ms), color="tab:blue", label="(S−1)/(m+S−1)", gid="formula")
    curve.plot([1], [0.0], "o", color="tab:red", label="this step", gid="point")
    _fixed_log2_ticks(curve, ms)
    curve.set_ylim(0, 1)
    curve.set_yticks([0, 0.5, 1])
    curve.set_xlabel("micro-batches m")
    curve.set_ylabel("bubble (idle share)")
    curve.legend(fontsize=7, loc="upper right")
    if errors:
        for names in _coinciding(errors["errors"]):  # identical curves: one line
            precision.plot(
                errors["ks"], errors["errors"][names[0]], marker=".", label="\n= ".join(names)
            )
        precision.axvline(1, color="tab:red", linestyle="--", gid="marker")
        _fixed_log2_ticks(precision, errors["ks"])
        precision.set_yscale("log")
        low = min(min(v) for v in errors["errors"].values())
        high = max(max(v) for v in errors["errors"].values())
        precision.set_ylim(low / 2, high * 10)  # room for the legend above the lines
        decades = range(math.floor(math.log10(low / 2)), math.ceil(math.log10(high * 10)) + 1)
        plain_log_ticks(precision.yaxis, [10.0**e for e in decades])
        precision.legend(fontsize=6, loc="upper left")
    precision.set_xlabel("k = m micro-batches accumulated")
    precision.set_ylabel("error vs float64")
    precision.title.set_text("accumulator precision")
    update_scale_explorer(fig, data)
    return fig


def update_scale_explorer(fig: Figure, data: dict) -> None:
    """Move `plot_scale_explorer`'s artists to `data`."""
    shapes.explorer("data", data)
    from ..figures import named_artists

    a = named_artists(fig)
    s, m = data["stages"], data["micro_batches"]
    spans = data["spans"] or []
    for kind in ("F", "B"):
        a[kind].set_verts(
            [
                [(start, st - 0.4), (end, st - 0.4), (end, st + 0.4), (start, st + 0.4)]
                for st, stage in enumerate(spans)
                for k, _, start, end in stage
                if k == kind
            ]
        )
    timeline = a["timeline"]
    timeline.set_xlim(0, max(data["makespan"], 1.0))
    timeline.set_ylim(s - 0.5, -0.5)
    timeline.set_yticks(range(s), [f"stage {i}" for i in range(s)])
    a["message"].set_text(data["refused"] or "")
    # two lines: one would run past the figure's left edge at the longest settings
    timeline.title.set_text(
        f"{data['schedule']}, S = {s}, m = {m}"
        + (f", last stage ×{data['slow_stage']:g}" if data["slow_stage"] != 1 else "")
        + ":\n"
        + (
            "refused"
            if data["refused"]
            else ("stage 0's " if data["slow_stage"] != 1 else "")
            + f"bubble {data['bubble']:.0%}, ≤ {data['in_flight']} micro-batch"
            + ("'s" if data["in_flight"] == 1 else "es'")
            + " activations held"
        )
    )
    a["formula"].set_ydata(data["formula_curve"])
    # the replayed bubble: on the formula's curve for equal stages, above it for a slower one
    a["point"].set_data([m], [data["bubble"] if data["bubble"] is not None else data["formula"]])
    a["point"].set_visible(not data["refused"])  # no step ran: no point on the curve
    a["curve"].set_title(f"S = {s} stages", fontsize=9)
    if "marker" in a:
        a["marker"].set_xdata([m, m])


def _fixed_log2_ticks(ax, values) -> None:
    # fixed ticks: a log locator would recompute them on every redraw of the explorer
    ax.set_xscale("log", base=2)
    ticks = [v for v in values if v & (v - 1) == 0]
    if len(ticks) > 6:
        ticks = ticks[::2]  # labels of neighbouring powers of 2 would run into each other
    ax.set_xticks(ticks, [str(v) for v in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
