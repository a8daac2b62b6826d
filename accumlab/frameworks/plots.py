"""Pure plots for lesson 11: data in, matplotlib Figure out (never pyplot)."""

from __future__ import annotations

import math

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from . import shapes
from .measure import EXACT, EXACT_FLOAT32
from .problem import make_problem

FLOOR = 1e-17  # an exact 0 cannot sit on a log axis: it is drawn here, and the axis says so
CEILING = 10.0
TICKS = (1e-16, 1e-12, 1e-8, 1e-4, 1.0)
MAX_STEPS = 10  # the lesson's problems have ten micro-batches: at most ten optimizer steps


def _floored(values) -> list[float]:
    return [math.nan if math.isnan(v) else max(v, FLOOR) for v in values]


def plot_step_errors(table, *, data: tuple[str, ...] = ("regression", "tokens")) -> Figure:
    """Relative gradient error of every optimizer step vs the reference, one group per framework,
    one panel per problem, from a `framework_table(...)`'s evidence."""
    shapes.table("table", table)
    data = (data,) if isinstance(data, str) else tuple(data)
    for d in data:
        if d not in table.checks:
            raise ValueError(f"data must be among {sorted(table.checks)}, got {d!r}")
    fig = Figure(figsize=(9, 3.0 * len(data) + 0.6), layout="constrained")
    axes = fig.subplots(len(data), 1, sharex=True, squeeze=False)[:, 0]
    names = [row["name"] for row in table.rows]
    for ax, d in zip(axes, data):
        checks = table.checks[d]
        expected = len(make_problem(d, table.k).windows())
        most = max(expected, *(len(c) for c in checks.values()))
        width = 0.8 / most
        for x, name in enumerate(names):
            steps = checks[name]
            for j, c in enumerate(steps):
                ax.bar(
                    x + (j - (most - 1) / 2) * width,
                    max(c.grad_error, FLOOR),
                    width,
                    color=f"C{j}",
                    label=f"step {j + 1}" if x == 0 else None,
                )
            if steps:  # this run's own threshold: float64's, or float32's for DeepSpeed
                ax.hlines(steps[0].tolerance, x - 0.45, x + 0.45, colors="grey", linestyles="--")
            for j in range(len(steps), expected):  # where the missing step's bar would stand
                slot = x + (j - (most - 1) / 2) * width
                ax.text(slot, 2 * FLOOR, "never\nstepped", fontsize=6, ha="center", color="C3")
        ax.set_yscale("log")
        ax.set_ylim(FLOOR / 2, CEILING)
        ax.set_ylabel("‖used − ref‖ / ‖ref‖", fontsize=9)
        ax.set_title(
            f"{d}, k = {table.k}: each optimizer step vs one big batch per window", fontsize=9
        )
        ax.legend(fontsize=7, loc="center left")
    axes[-1].set_xticks(
        range(len(names)),
        [row["framework"] for row in table.rows],
        rotation=20,
        ha="right",
        fontsize=8,
    )
    fig.suptitle(
        f"dashed: each run's exact threshold ({EXACT:g} in float64, {EXACT_FLOAT32:g} in "
        f"float32); an exact 0 is drawn at {FLOOR:g}",
        fontsize=8,
    )
    return fig


def plot_step_explorer(data: dict, *, max_steps: int | None = None) -> Figure:
    """The explorer's figure for one setting: gradient error (left) and logged-loss error (right)
    of each optimizer step, with room for `max_steps` steps (default: this setting's). A fixed
    layout; the explorer moves its artists with `update_step_explorer`."""
    shapes.explorer("data", data)
    max_steps = max_steps or max(len(data["grad_error"]), 1)
    fig = Figure(figsize=(9, 3.4))
    # a fixed layout: constrained layout would re-solve the whole figure on every change
    fig.subplots_adjust(left=0.10, right=0.98, bottom=0.16, top=0.80, wspace=0.30)
    ax_grad, ax_loss = fig.subplots(1, 2)
    steps = list(range(1, max_steps + 1))
    for ax, ylabel in (
        (ax_grad, "gradient: ‖used − ref‖ / ‖ref‖"),
        (ax_loss, "logged loss: |logged − true| / true"),
    ):
        ax.set_yscale("log")
        ax.set_ylim(FLOOR / 2, CEILING)
        # few fixed ticks with plain labels, no minor ones: log labels are mathtext ($10^{-16}$),
        # parsed again on every draw — most of a redraw's cost
        ax.set_yticks(TICKS, [f"{t:.0e}" for t in TICKS])
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlim(0.5, max_steps + 0.5)
        ax.set_xticks(steps)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(ylabel, fontsize=9)
    ax_grad.axhline(EXACT, color="grey", linestyle="--", linewidth=1, gid="exact_line")
    ax_grad.plot([], [], "o-", color="C3", gid="grad")
    ax_loss.plot([], [], "s-", color="C0", gid="loss")
    # above the axes, not inside them: a line can pass anywhere in the plotting area
    ax_grad.text(0.0, 1.02, "", transform=ax_grad.transAxes, fontsize=8, va="bottom", gid="missing")
    ax_loss.text(0.5, 0.5, "", transform=ax_loss.transAxes, ha="center", fontsize=10, gid="no_log")
    fig.suptitle("", fontsize=9, gid="title")
    update_step_explorer(fig, data)
    return fig


def update_step_explorer(fig: Figure, data: dict) -> None:
    """Move `plot_step_explorer`'s artists to `data` (no new axes, no re-layout)."""
    shapes.explorer("data", data)
    from ..figures import named_artists

    a = named_artists(fig)
    steps = list(range(1, len(data["grad_error"]) + 1))
    a["grad"].set_data(steps, _floored(data["grad_error"]))
    losses = _floored(data["loss_error"])
    logged = not all(math.isnan(v) for v in losses)
    a["loss"].set_data(steps if logged else [], losses if logged else [])
    a["no_log"].set_text("" if logged else "logs no loss by itself")
    lost = data["expected_steps"] - len(steps)
    a["missing"].set_text(f"{lost} window(s) never stepped" if lost > 0 else "")
    a["exact_line"].set_ydata([data["tolerance"]] * 2)
    a["title"].set_text(
        f"{data['label']} · {data['data']} · k = {data['k']} · windows {data['windows']}\n"
        f"backward saw: {data['divided_by']}   (exact 0 drawn at {FLOOR:g}; dashed: exact below "
        f"{data['tolerance']:g})"
    )


def step_explorer_caption(data: dict) -> str:
    """The explorer's readout as text (HTML): the windows, what backward saw, each step's errors."""
    shapes.explorer("data", data)

    def errors(values) -> str:
        shown = [f"{v:.1e}" for v in values if not math.isnan(v)]
        return ", ".join(shown) if shown else "nothing logged"

    lost = data["expected_steps"] - len(data["grad_error"])
    return (
        f"<b>{data['label']}</b>, {data['data']}, k = {data['k']}: windows of {data['windows']} "
        f"micro-batches{f', {lost} window(s) never stepped' if lost > 0 else ''}; backward saw "
        f"{data['divided_by']}.<br>Gradient error per step: {errors(data['grad_error'])} (exact "
        f"below {data['tolerance']:g}); logged-loss error: {errors(data['loss_error'])}."
    )
