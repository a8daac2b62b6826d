"""Lesson 07's figures: pure functions from `al.dist.sync_experiments(...)` data to matplotlib Figures."""

from __future__ import annotations

from matplotlib.figure import Figure

from .. import _validate
from . import shapes

MODE_LABELS = {
    "every": "sync every micro-step",
    "no_sync": "no_sync (forward + backward)",
    "require_flag": "require_backward_grad_sync",
    "backward_only": "no_sync around backward only",
}


def plot_sync_rounds(ddp: dict, *, title: str | None = None) -> Figure:
    """All-reduce calls made by each backward of one optimizer step, per way of syncing."""
    shapes.ddp("ddp", ddp)
    modes = list(ddp)
    k = len(ddp[modes[0]]["per_backward"])
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / len(modes)
    for j, mode in enumerate(modes):
        xs = [i + (j - (len(modes) - 1) / 2) * width for i in range(k)]
        ax.bar(
            xs,
            ddp[mode]["per_backward"],
            width,
            label=f"{MODE_LABELS.get(mode, mode)} ({ddp[mode]['allreduce_calls']} in all)",
        )
    ax.set_xticks(range(k), [f"micro-step {i + 1}" for i in range(k)])
    ax.set_ylabel("all-reduce calls in this backward")
    top = max(max(ddp[m]["per_backward"]) for m in modes)
    ax.set_ylim(0, top * 1.7)  # room above the bars for the legend
    ax.set_title(
        title or "When DDP all-reduces during one optimizer step (counted by a comm hook)",
        fontsize=10,
    )
    ax.legend(fontsize=8, ncol=2, loc="upper center")
    return fig


def _series(rows: list[dict], ranks: int, micro_batch: int, no_sync: bool, key: str):
    pts = sorted(
        (r["k"], r[key])
        for r in rows
        if r["ranks"] == ranks and r["micro_batch"] == micro_batch and r["no_sync"] == no_sync
    )
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_step_times(
    rows: list[dict], *, ranks: int, micro_batch: int, plan: dict | None = None, device: str = ""
) -> Figure:
    """Measured time per optimizer step against k, syncing every micro-step vs no_sync; with the
    `plan` the rows were measured under (`summary["plan"]`), the title says what they measure."""
    from .backend import timing_note

    shapes.rows_at("rows", rows, ranks=ranks, micro_batch=micro_batch)
    if plan is not None:
        _validate.result("plan", plan, shapes.PLAN, "a plan's as_dict() (summary['plan'])")
    fig = Figure(figsize=(6.5, 3.2), layout="constrained")
    ax = fig.add_subplot()
    for no_sync, style in ((False, "o-"), (True, "s--")):
        ks, ts = _series(rows, ranks, micro_batch, no_sync, "step_time_s")
        ax.plot(
            ks,
            [t * 1e3 for t in ts],
            style,
            label="no_sync on k−1 micro-steps" if no_sync else "sync every micro-step",
        )
    ks = sorted({r["k"] for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("micro-steps per optimizer step k")
    ax.set_ylabel("ms per optimizer step (median)")
    where = f" on {device}" if device else ""
    note = f"\n({timing_note(plan)})" if plan is not None else ""
    ax.set_title(
        f"Measured step time, {ranks} rank(s), micro-batch {micro_batch}{where}{note}", fontsize=9
    )
    ax.legend(fontsize=8)
    return fig


def plot_fsdp_grad_memory(fsdp: dict) -> Figure:
    """FSDP2: gradient bytes each rank holds after every micro-step, and reduce-scatter traffic."""
    shapes.fsdp("fsdp", fsdp)
    fig = Figure(figsize=(8, 3.2), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    labels = {
        "sync_each": "reduce-scatter every micro-step",
        "sync_last": "set_requires_gradient_sync(False) until the last",
    }
    for v, style in (("sync_each", "o-"), ("sync_last", "s--")):
        held = fsdp[v]["grad_bytes_per_micro_step"]
        left.plot(range(1, len(held) + 1), [b / 1024 for b in held], style, label=labels[v])
    left.axhline(
        fsdp["param_bytes_full"] / 1024,
        color="grey",
        linewidth=1,
        linestyle=":",
        label="size of the full (unsharded) gradient",
    )
    left.set_ylim(bottom=0)
    left.set_xlabel("micro-step")
    left.set_ylabel("gradient KiB held per rank")
    left.set_xticks(range(1, len(fsdp["sync_each"]["grad_bytes_per_micro_step"]) + 1))
    left.legend(fontsize=7)
    left.set_title("Gradient memory per rank", fontsize=10)
    right.bar(
        ["every\nmicro-step", "last only"],
        [
            fsdp["sync_each"]["reduce_scatter_bytes"] / 1024,
            fsdp["sync_last"]["reduce_scatter_bytes"] / 1024,
        ],
        color=["tab:blue", "tab:orange"],
    )
    # the collective's input on each rank; what crosses the wire depends on the algorithm
    # (a ring reduce-scatter sends (ranks - 1) / ranks of it)
    right.set_ylabel("reduce-scatter input, KiB per rank")
    right.set_title("Communication per optimizer step", fontsize=10)
    return fig


def plot_token_normalisation(tokens: dict) -> Figure:
    """Relative error against one process: per-rank token means vs an all-reduced token count."""
    shapes.tokens("tokens", tokens)
    fig = Figure(figsize=(6, 3), layout="constrained")
    ax = fig.add_subplot()
    names = ["per-rank token mean", "all-reduced token count"]
    errs = [
        max(tokens[v]["vs_reference"]["max_rel"], 1e-17) for v in ("local_mean", "global_count")
    ]
    ax.bar(names, errs, color=["tab:red", "tab:green"])
    ax.set_yscale("log")
    ax.set_ylabel("max relative gradient error")
    ax.set_title(
        f"Ranks holding {tokens['tokens_per_rank']} real tokens vs one process", fontsize=10
    )
    return fig


_SYNC_KEYS = (
    ("allreduce_calls", "all-reduce calls / step", 1),
    ("allreduce_time_s", "ms / step in all-reduces (each timed alone)", 1e3),
    ("step_time_s", "ms / step (measured)", 1e3),
)


def plot_sync_explorer(view: dict) -> Figure:
    """Lesson 07's widget: all-reduce calls, the time they take when each is timed alone, and the
    step time against k for the chosen ranks and micro-batch, both ways of syncing; the chosen
    (k, no_sync) point is ringed. The explorer moves its artists with `update_sync_explorer`."""
    shapes.view("view", view)
    from matplotlib.ticker import NullLocator

    fig = Figure(figsize=(9, 3), layout="constrained")
    for ax, (key, label, _) in zip(fig.subplots(1, 3), _SYNC_KEYS, strict=True):
        ax.set_gid(key)
        for no_sync, style in ((False, "o-"), (True, "s--")):
            name = "no_sync" if no_sync else "sync every step"
            ax.plot([], [], style, label=name, gid=f"{key} {no_sync}")
        ax.plot(
            [], [], "o", markersize=14, markerfacecolor="none", color="black", gid=f"{key} ring"
        )
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("k")
        # y given: the title stays put, instead of being re-placed after measuring tick labels
        ax.set_title(label, fontsize=9, y=1.0)
    fig.axes[0].legend(fontsize=7, loc="upper left")  # a fixed corner: "best" searches per draw
    fig.suptitle("", fontsize=10, gid="title")
    update_sync_explorer(fig, view)
    return fig


def update_sync_explorer(fig: Figure, view: dict) -> None:
    """Move `plot_sync_explorer`'s lines, ring, limits and title to `view` (`al.dist.sweep_view`)."""
    shapes.view("view", view)
    from ..figures import named_artists

    a = named_artists(fig)
    sel = view["selected"]
    ks = view["series"][False]["k"]
    for key, _, scale in _SYNC_KEYS:
        top = 0.0
        for no_sync in (False, True):
            series = view["series"][no_sync]
            ys = [y * scale for y in series[key]]
            a[f"{key} {no_sync}"].set_data(series["k"], ys)
            top = max([top, *ys])
        # the chosen point, read off its series (the all-reduce time is not a row's field)
        chosen = view["series"][bool(sel["no_sync"])]
        y = chosen[key][chosen["k"].index(sel["k"])]
        a[f"{key} ring"].set_data([sel["k"]], [y * scale])
        ax = a[key]
        ax.set_xlim(min(ks) / 1.3, max(ks) * 1.3)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_ylim(0, top * 1.1 or 1.0)
    if view["ranks"] == 1:
        sent = (
            f"nothing sent between ranks ({sel['allreduce_calls']} hook call(s) on a 1-rank group)"
        )
    else:
        sent = (
            f"{sel['allreduce_calls']} all-reduce(s) of "
            f"{sel['allreduce_bytes'] / 1024:.0f} KiB input in all"
        )
    a["title"].set_text(
        f"{view['ranks']} rank(s), micro-batch {view['micro_batch']}: {sent}, "
        f"{sel['step_time_s'] * 1e3:.2f} ms per step{view.get('source', '')}\n"
        f"times are noisy: the two modes at k = 1 run the same code and differ by "
        f"{view['noise_s'] * 1e3:.2f} ms"
    )
