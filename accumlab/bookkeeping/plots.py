"""Pure plots for lesson 10 (bookkeeping under accumulation): data in, matplotlib Figure out."""

from __future__ import annotations

from matplotlib.figure import Figure

from .logs import micro_step_axis
from .shapes import budget as check_budget
from .shapes import checks as check_checks
from .shapes import explorer, logged, lr_curves
from .shapes import runs as check_runs
from .shapes import schedules as check_schedules

FLOOR = 1e-17  # an exact 0 cannot sit on a log axis: it is drawn here and the axis says so
TITLES = {
    "window": "item-weighted mean over the window",
    "sum_of_scaled": "Σ of the ÷k-scaled micro-losses",
    "last_scaled": "last micro-batch's loss ÷ k",
    "sum_of_unscaled": "Σ of the micro-losses, not divided",
}


def plot_logged_losses(curves: dict, keys=("last_scaled", "sum_of_unscaled", "window")) -> Figure:
    """{k: logged_curves(...)}: one column per logging rule, against optimizer steps (top) and
    against micro-steps (bottom), one line per k."""
    keys = logged("curves", curves, keys)
    fig = Figure(figsize=(11, 5.6), layout="constrained")
    axes = fig.subplots(2, len(keys), sharey="col", squeeze=False)
    for col, key in enumerate(keys):
        for k, logs in curves.items():
            ys = logs[key]
            axes[0][col].plot(range(1, len(ys) + 1), ys, marker=".", label=f"k = {k}")
            axes[1][col].plot(micro_step_axis(len(ys), k), ys, marker=".", label=f"k = {k}")
        axes[0][col].set_title(TITLES[key], fontsize=9)
        axes[0][col].set_xlabel("optimizer step")
        axes[1][col].set_xlabel("micro-step")
    axes[0][0].set_ylabel("logged loss")
    axes[1][0].set_ylabel("logged loss")
    axes[0][0].legend(fontsize=8)
    return fig


def plot_schedules(schedules: dict) -> Figure:
    """{label: Schedule}: micro-batches per optimizer step for each counter; red dots mark windows
    holding micro-batches of two epochs, dotted lines the epoch boundaries."""
    check_schedules("schedules", schedules)
    fig = Figure(figsize=(10, 1.9 * len(schedules) + 0.6), layout="constrained")
    axes = fig.subplots(len(schedules), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, s) in zip(axes, schedules.items()):
        steps = list(range(1, s.steps + 1))
        ax.bar(steps, s.sizes, width=1.0, color="tab:blue", alpha=0.6, label="window size")
        straddle = s.straddling()
        ax.plot(
            [t + 1 for t in straddle],
            [s.sizes[t] for t in straddle],
            "o",
            color="tab:red",
            label="window spanning two epochs",
        )
        done = 0
        for i, n in enumerate(s.steps_per_epoch()[:-1]):
            done += n
            end = "end of an epoch" if i == 0 else None  # one legend entry for all the lines
            ax.axvline(done + 0.5, color="black", linestyle=":", linewidth=1, label=end)
        ax.set_ylabel("micro-batches")
        ax.set_ylim(0, max(s.sizes) + 1.5)
        left = f", {len(s.leftover)} never stepped" if s.leftover else ""
        ax.set_title(
            f"{label}: {s.steps} steps, sizes {s.histogram()}, {len(straddle)} straddling{left}",
            fontsize=9,
        )
    axes[-1].set_xlabel("optimizer step")
    handles = {}  # one entry per meaning, from whichever panel draws it
    for ax in axes:
        for handle, name in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(name, handle)
    fig.legend(handles.values(), handles.keys(), loc="outside upper center", ncols=3, fontsize=8)
    return fig


def plot_log_ratio(runs: dict) -> Figure:
    """{label: Run}: the logged Σ of scaled micro-losses divided by the true window mean, per
    optimizer step (1 where the log is right)."""
    check_runs("runs", runs)
    fig = Figure(figsize=(9, 3.2), layout="constrained")
    ax = fig.add_subplot()
    for label, r in runs.items():
        ratio = [a / b for a, b in zip(r.logs["sum_of_scaled"], r.logs["window"], strict=True)]
        ax.plot(range(1, len(ratio) + 1), ratio, marker=".", label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("logged ÷ true window loss")
    ax.set_title("what `Σ loss / k` logs at the epoch boundaries", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def plot_lr_schedules(curves: dict, *, peak_lr: float = 1.0) -> Figure:
    """{label: learning-rate factor per optimizer step taken}."""
    lr_curves("curves", curves, peak_lr)
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.add_subplot()
    for label, lrs in curves.items():
        ax.plot(range(1, len(lrs) + 1), [peak_lr * v for v in lrs], label=label)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate ÷ peak" if peak_lr == 1.0 else "learning rate")
    ax.set_title("the same warm-up ratio, sized in two units", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def plot_resume_damage(checks) -> Figure:
    """ResumeCheck list: relative distance of the final weights from the uninterrupted run."""
    check_checks("checks", checks)
    fig = Figure(figsize=(7.5, 0.42 * len(checks) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    labels = [c.omission for c in checks][::-1]
    values = [max(c.rel_error, FLOOR) for c in checks][::-1]
    colors = ["tab:green" if c.bit_exact else "tab:red" for c in checks][::-1]
    ax.barh(labels, values, color=colors)
    ax.set_xscale("log")
    ax.set_xlim(FLOOR / 10, 1)
    ax.set_xlabel(f"‖w − w_uninterrupted‖ / ‖w_uninterrupted‖ (bit-exact drawn at {FLOOR:g})")
    ax.set_title("what the resumed run lost (green: bit for bit)", fontsize=9)
    return fig


def plot_tokens_per_step(budget) -> Figure:
    """TokenBudget: sequences, real tokens and padded tokens per optimizer step."""
    check_budget("budget", budget)
    fig = Figure(figsize=(9, 3.2), layout="constrained")
    ax_s, ax_t = fig.subplots(1, 2)
    steps = list(range(1, budget.steps + 1))
    ax_s.bar(steps, budget.samples, color="tab:blue")
    ax_s.set_ylabel("sequences per step")
    ax_t.bar(steps, budget.padded, color="tab:gray", label="processed (with padding)")
    ax_t.bar(steps, budget.real, color="tab:orange", label="real tokens")
    ax_t.set_ylabel("tokens per step")
    ax_t.legend(fontsize=8)
    for ax in (ax_s, ax_t):
        ax.set_xlabel("optimizer step")
    return fig


# the explorer's error axis: round-off sits near 1e-16; an exact 0 is drawn lower, on a row of
# its own (EXACT) whose tick says 0 and whose line says bit-exact, so it cannot pass for round-off
EXACT = 1e-21
_ERROR_TICKS = [EXACT, 1e-16, 1e-8, 1.0]
_ERROR_LABELS = ["0", "1e-16", "1e-08", "1e+00"]


def plot_bookkeeping_explorer(data: dict) -> Figure:
    """The explorer's three panels for `bookkeeping_data(...)` output: window size per optimizer
    step (left), the logged loss (middle), and the resumed weights' error after each step
    (right); how many steps had each size is in the summary line. Fixed layout; the explorer
    moves its artists with `update_bookkeeping_explorer`."""
    explorer("data", data)
    from matplotlib.ticker import FixedFormatter, FixedLocator, MaxNLocator, NullLocator

    # every text costs a layout on each redraw (a legend ~15 ms): short labels here; the
    # numbers and the colours' meaning go in the explorer's summary line (explorer_summary)
    fig = Figure(figsize=(9.5, 2.9))
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.17, top=0.96, wspace=0.36)
    ax_w, ax_l, ax_e = fig.subplots(1, 3)
    for ax, name in ((ax_w, "ax_w"), (ax_l, "ax_l"), (ax_e, "ax_e")):
        ax.set_gid(name)
    ax_w.plot([], [], drawstyle="steps-mid", color="tab:blue", gid="sizes")
    ax_w.plot([], [], "o", color="tab:red", gid="straddle")
    ax_w.vlines([], 0, 1, colors="black", linestyles="dotted", linewidth=1, gid="epochs_w")
    ax_w.axvline(0, color="tab:purple", linewidth=1.5, gid="stop_w")
    ax_w.set_xlabel("optimizer step")
    ax_w.set_ylabel("window size")
    # the true mean wide underneath, the logged Σ loss / k thin on top: green shows where they part
    ax_l.plot([], [], color="tab:green", linewidth=3, gid="log_window")
    ax_l.plot([], [], color="tab:orange", linewidth=1, gid="log_scaled")
    ax_l.vlines([], 0, 1, colors="black", linestyles="dotted", linewidth=1, gid="epochs_l")
    # a fixed corner: "best" would search the data for room on every redraw
    ax_l.legend(["true window mean", "Σ loss / k"], loc="upper right", fontsize=7, handlelength=1.2)
    ax_l.set_xlabel("optimizer step")
    ax_l.set_ylabel("logged loss")
    ax_e.plot([], [], color="tab:red", marker=".", gid="errors")
    # a step where the resumed weights equal the uninterrupted ones exactly: green, on the 0 row
    ax_e.plot([], [], "o", color="tab:green", markersize=3, gid="exact")
    ax_e.axhline(EXACT, color="tab:green", linewidth=0.6, linestyle=":")
    ax_e.text(
        0.98,
        3 * EXACT,
        "0 (bit-exact)",
        transform=ax_e.get_yaxis_transform(),
        ha="right",
        va="bottom",
        fontsize=7,
        color="tab:green",
    )
    ax_e.axvline(0, color="tab:purple", linewidth=1.5, gid="stop_e")
    ax_e.set_yscale("log")
    ax_e.set_ylim(EXACT / 10, 10)
    # fixed ticks and labels: no tick search or mathtext layout on a slider move
    ax_e.yaxis.set_major_locator(FixedLocator(_ERROR_TICKS))
    ax_e.yaxis.set_major_formatter(FixedFormatter(_ERROR_LABELS))
    ax_e.yaxis.set_minor_locator(NullLocator())
    ax_e.set_xlabel("optimizer step")
    ax_e.set_ylabel("resumed error")  # short: a long label runs into the middle panel
    # three labelled ticks per axis: tick labels are most of a redraw's cost
    for ax in (ax_w, ax_l, ax_e):
        ax.xaxis.set_major_locator(MaxNLocator(3, integer=True))
    for ax in (ax_w, ax_l):
        ax.yaxis.set_major_locator(MaxNLocator(3))
    update_bookkeeping_explorer(fig, data)
    return fig


def update_bookkeeping_explorer(fig: Figure, d: dict) -> None:
    """Move the artists of `plot_bookkeeping_explorer`'s figure to `d` (new data, same artists)."""
    explorer("d", d)
    from ..figures import named_artists

    a, s = named_artists(fig), d["schedule"]
    steps = list(range(1, s.steps + 1))
    boundaries, done = [], 0
    for n in s.steps_per_epoch()[:-1] if s.steps else []:  # no steps: no step axis to mark
        done += n
        boundaries.append(done + 0.5)
    top = max(s.sizes, default=s.accumulation_steps) + 1  # no sizes: the run never steps
    a["sizes"].set_data(steps, s.sizes)
    straddle = s.straddling()
    a["straddle"].set_data([t + 1 for t in straddle], [s.sizes[t] for t in straddle])
    a["epochs_w"].set_segments([[(x, 0), (x, top)] for x in boundaries])
    a["stop_w"].set_xdata([d["stop_step"] + 0.5] * 2)
    a["ax_w"].set_xlim(0, s.steps + 1)
    a["ax_w"].set_ylim(0, top)
    logs = d["logs"]
    a["log_window"].set_data(steps, logs["window"])
    a["log_scaled"].set_data(steps, logs["sum_of_scaled"])
    values = logs["window"] + logs["sum_of_scaled"]
    lo, hi = min(values, default=0.0), max(values, default=1.0)
    roof = hi + 0.45 * (hi - lo) if hi > lo else hi * 1.05  # room above the data: the legend
    a["epochs_l"].set_segments([[(x, lo), (x, roof)] for x in boundaries])
    a["ax_l"].set_xlim(0, s.steps + 1)
    a["ax_l"].set_ylim(lo * 0.95 if lo > 0 else lo, roof)
    pairs = list(zip(d["error_steps"], d["errors"], strict=True))
    a["errors"].set_data([t for t, e in pairs if e > 0], [e for t, e in pairs if e > 0])
    a["exact"].set_data([t for t, e in pairs if e == 0], [EXACT for t, e in pairs if e == 0])
    a["stop_e"].set_xdata([d["stop_step"] + 0.5] * 2)
    a["ax_e"].set_xlim(0, max(s.steps, d["steps"]) + 1)


def explorer_summary(d: dict) -> str:
    """The explorer's numbers, in words (shown beside the figure, not drawn in it)."""
    explorer("d", d)
    s = d["schedule"]
    left = f", {len(s.leftover)} micro-batch(es) never stepped" if s.leftover else ""
    verdict = "bit for bit" if d["bit_exact"] else f"final weights off by {d['rel_error']:.2e}"
    if d["bit_exact"] and s.steps == 0 and (d["extra_reads"] or d["missed_reads"]):
        # the reads differ, yet no step ever uses them: say why the weights still agree
        verdict = "the weights still equal bit for bit: no optimizer step uses those reads"
    k, per_epoch = s.accumulation_steps, s.batches_per_epoch
    capped = ""
    if s.counter == "sync_at_epoch_end" and k > per_epoch:
        capped = (
            f" <b>k is capped at the epoch's {per_epoch} micro-batches</b>: one window per epoch."
        )
    if s.steps == 0:  # k above what the counter ever accumulates: nothing to log or compare
        run = (
            f"<b>0 optimizer steps: the loop never steps</b> (its counter never reaches "
            f"k = {s.accumulation_steps}{left})."
        )
    else:
        run = (
            f"{s.steps} optimizer steps, window sizes {s.histogram()}, "
            f"{len(s.straddling())} spanning two epochs{left}.{capped}"
        )
    held = d["in_window"]
    lost = " (lost)" if held and d["omission"] == "partial window's .grad" else ""
    return (
        f"{s.counter}, k = {s.accumulation_steps}, {s.epochs} epoch(s) of "
        f"{s.batches_per_epoch} micro-batches: {run} "
        f"Interrupted after {d['stop_at']} micro-batches ({d['stop_step']} optimizer steps, "
        f"{held} micro-batch(es) in .grad{lost}); resume: "
        f"<b>{d['omission']}</b> → resumed run: {d['steps']} steps, "
        f"{d['extra_reads']} extra / {d['missed_reads']} missed sample reads, <b>{verdict}</b>."
        "<br>Left: red dots, windows spanning two epochs; dotted, epoch ends; purple, the "
        "interruption. Right: the resumed run's distance from the uninterrupted one after each "
        "step (red; green on the 0 row: equal bit for bit)."
    )
