"""What lesson 09's results look like, so its plots can say what is wrong with what they are
handed (a hand-built or partial dict, a figure they did not build) instead of failing inside."""

from __future__ import annotations

from .._validate import finite_float, finite_floats, nonempty, positive_ints, result

SWEEP = {
    "sizes": nonempty([int]),
    "cosine": nonempty([float]),
    "loss": nonempty([float]),
    "chance": nonempty([float]),
}
AUX_SWEEP = {
    "window": int,
    "sizes": nonempty([int]),
    "seeds": nonempty([int]),
    "gaps": {str: {str: nonempty([nonempty([float])])}},
}
ROW = {
    "coupling": str,
    "micro_batch_size": int,
    "accumulation_steps": int,
    "tokens": str,
    "naive": float,
    "running": (float, type(None)),
    "fix": float,
    "naive_label": str,
    "fix_label": str,
    "data": str,
}
EXPLORER = {"coupling": str, "rows": nonempty([ROW])}


def gaps(name: str, value) -> dict:
    """{label: gap}: at least one, each a finite number >= 0 (a NaN bar would silently vanish)."""
    result(name, value, {str: float}, "a dict from labels to gaps (numbers)")
    for label, gap in value.items():
        finite_float(f"{name}[{label!r}]", gap, minimum=0.0)
    return value


def curves(name: str, value, xs_name: str, xs) -> dict:
    """{label: [gap per x]} against the x values `xs`: each curve as long as xs."""
    xs = positive_ints(xs_name, xs, minimum=0)
    result(name, value, {str: nonempty([float])}, "a dict from labels to lists of gaps")
    for label, ys in value.items():
        if len(ys) != len(xs):
            raise ValueError(
                f"{name}[{label!r}] must give one gap per entry of {xs_name} ({len(xs)}), "
                f"got {len(ys)}"
            )
        finite_floats(f"{name}[{label!r}]", ys, minimum=0.0)  # a NaN point silently vanishes
    return value


def partition_gaps(name: str, value) -> dict:
    what = "a dict from aggregations to al.coupling.partition_gaps(...) results"
    result(name, value, {str: nonempty([float])}, what)
    for label, ys in value.items():
        finite_floats(f"{name}[{label!r}]", ys, minimum=0.0)
    return value


def sweep(name: str, value) -> dict:
    result(name, value, SWEEP, "what al.coupling.contrastive_sweep(...) returns")
    for key in ("cosine", "loss", "chance"):
        finite_floats(f"{name}[{key!r}]", value[key])
        if len(value[key]) != len(value["sizes"]):
            raise ValueError(
                f"{name}[{key!r}] must give one value per size ({len(value['sizes'])}), got "
                f"{len(value[key])}"
            )
    return value


def aux_sweep(name: str, value) -> dict:
    """What al.coupling.aux_loss_sweep(...) returns: per order and mode, one curve per seed."""
    result(name, value, AUX_SWEEP, "what al.coupling.aux_loss_sweep(...) returns")
    for order, modes in value["gaps"].items():
        for mode, per_seed in modes.items():
            if len(per_seed) != len(value["seeds"]):
                raise ValueError(
                    f"{name}['gaps'][{order!r}][{mode!r}] must hold one curve per seed "
                    f"({len(value['seeds'])}), got {len(per_seed)}"
                )
            for i, ys in enumerate(per_seed):
                curves(
                    f"{name}['gaps'][{order!r}][{mode!r}][{i}]", {mode: ys}, "sizes", value["sizes"]
                )
    return value


def explorer(name: str, value) -> dict:
    result(name, value, EXPLORER, "what al.coupling.explore_coupling(...) returns")
    couplings = [r["coupling"] for r in value["rows"]]
    if value["coupling"] not in couplings:
        raise ValueError(
            f"{name}['coupling'] must be one of its rows' couplings {couplings}, "
            f"got {value['coupling']!r}"
        )
    return value


def explorer_figure(name: str, fig, data: dict):
    """A figure `plot_coupling_explorer` built for as many couplings as `data` holds."""
    from matplotlib.figure import Figure

    explorer("data", data)
    containers = fig.axes[0].containers if isinstance(fig, Figure) and fig.axes else []
    if len(containers) != 3 or any(len(c) != len(data["rows"]) for c in containers):
        raise ValueError(
            f"{name} must be the Figure al.coupling.plot_coupling_explorer(...) returned (for "
            f"{len(data['rows'])} couplings), got {type(fig).__name__} {fig!r:.60}"
        )
    return fig
