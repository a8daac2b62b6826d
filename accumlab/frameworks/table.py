"""Lesson 11's side-by-side table: every cell but the last computed from the recorded runs, with
the versions it was measured on (it holds for those versions; rerun the lesson after an upgrade).
The last column is text, each line naming the lesson's run that proves it."""

from __future__ import annotations

from dataclasses import dataclass, field

from .._validate import result
from .hooks import FrameworkRun
from .measure import StepCheck, check_run, final_weight_error, saw_label, tolerance
from .runs import ALL, versions

# what each framework asks of you for the exact big-batch gradient; every line is a run of the
# lesson (the name in brackets) whose steps all match the reference
TO_BE_EXACT = {
    "reference": "—",
    "plain_loop": "divide Σ item losses by the window's items, counted before its first backward "
    "[reference]",
    "accelerate": "prefetch and count the window, pass Σ loss × k ÷ window items to "
    "`accelerator.backward`, step after the window, outside `accumulate()`: the usage guide's "
    "skeleton [accelerate_global]",
    "lightning": "return Σ loss × k ÷ window items from `training_step` [lightning_exact]",
    "trainer": "a forward with `**kwargs` (or `accepts_loss_kwargs=True`) that divides Σ by the "
    "`num_items_in_batch` it is passed "
    "[trainer_num_items]",
    "trainer_num_items": "— (clipping: `max_grad_norm` defaults to 1.0) [trainer_default_clip]",
    "deepspeed": "(ZeRO 0) never ÷ k yourself; for short or unequal windows hand `backward` Σ loss ÷ window "
    "items with `scale_wrt_gas=False` and set the boundary before every micro-batch "
    "[deepspeed_exact], or go unmanaged, one `step()` per window [deepspeed_unmanaged]",
}
# each column says which problem it is measured on: regression (equal micro-batches, so only the
# short window can go wrong) or tokens (unequal micro-batches)
COLUMNS = (
    "framework",
    "version",
    "tokens: backward saw",
    "regression: short last window",
    "tokens: worst step vs reference",
    "tokens: logged loss",
    "regression: optimizer / scheduler steps",
    "regression: zero_grad calls, after forwards",
    "final weights vs reference (regression / tokens)",
    "to get the exact gradient (text; the run in brackets proves it)",
)


@dataclass
class FrameworkTable:
    """Rows of computed cells; `checks[data][name]` keeps the per-step evidence behind them."""

    rows: list[dict[str, str]]
    versions: dict[str, str]
    k: int
    checks: dict[str, dict[str, list[StepCheck]]] = field(default_factory=dict)

    def row(self, name: str) -> dict[str, str]:
        for row in self.rows:
            if row["name"] == name:
                return row
        raise ValueError(f"name must be one of {[r['name'] for r in self.rows]}, got {name!r}")

    def _repr_markdown_(self) -> str:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        for row in self.rows:
            lines.append("| " + " | ".join(row[c].replace("|", "\\|") for c in COLUMNS) + " |")
        measured = ", ".join(self.versions.values())
        return (
            "\n".join(lines)
            + f"\n\nMeasured at k = {self.k} with {measured}: the table holds for these versions."
        )

    def __str__(self) -> str:
        return self._repr_markdown_()


def _short_window(checks: list[StepCheck], run: FrameworkRun) -> str:
    last = run.problem.windows()[-1]
    if len(last) == run.problem.k:
        return f"none at k = {run.problem.k}"
    stepped = [c for c in checks if c.window == last]
    if not stepped:
        return f"never stepped in this epoch ({len(last)} micro-batches)"
    c = stepped[0]
    if c.grad_error <= c.tolerance:
        return "exact"
    return f"×{c.scale:.3g} ({c.divided_by}; it holds {len(last)})"


def _tokens(checks: list[StepCheck]) -> str:
    worst = max(c.grad_error for c in checks)
    exact = "exact" if checks[0].tolerance < 1e-6 else "exact to float32"
    return exact if worst <= checks[0].tolerance else f"off by up to {worst:.0%}"


def _logged(checks: list[StepCheck]) -> str:
    kinds = sorted({c.logged_as for c in checks})
    if kinds == [""]:
        return "nothing (you log it)"
    return ", ".join(kinds)


def _steps(run: FrameworkRun) -> str:
    return f"{len(run.steps)} / {len(run.scheduler_steps)} of {len(run.problem.windows())}"


def framework_table(runs: dict[str, dict[str, FrameworkRun]]) -> FrameworkTable:
    """The side-by-side table from `run_all(...)`'s runs on "regression" and "tokens" (both at
    the same k, the reference among them). Lesson 11."""
    result("runs", runs, {str: {str: FrameworkRun}}, "what al.frameworks.run_all(...) returns")
    if set(runs) != {"regression", "tokens"}:
        raise ValueError(f"runs must hold 'regression' and 'tokens', got {sorted(runs)}")
    for data, by_name in runs.items():
        if "reference" not in by_name:
            raise ValueError(f"runs[{data!r}] must include the 'reference' run")
    ks = {run.problem.k for by_name in runs.values() for run in by_name.values()}
    if len(ks) != 1:
        raise ValueError(f"every run must use the same k, got k = {sorted(ks)}")
    checks = {d: {n: check_run(r) for n, r in by_name.items()} for d, by_name in runs.items()}
    rows = []
    for name, reg in runs["regression"].items():
        tok = runs["tokens"].get(name)
        if tok is None:
            continue
        c_reg, c_tok = checks["regression"][name], checks["tokens"][name]
        finals = [
            final_weight_error(r, runs[d]["reference"])
            for d, r in (("regression", reg), ("tokens", tok))
        ]
        rows.append(
            {
                "name": name,
                "framework": ALL[name].label
                + (" — STAND-IN" if reg.version.startswith("STAND-IN") else ""),
                "version": reg.version,
                COLUMNS[2]: saw_label(c_tok),
                COLUMNS[3]: _short_window(c_reg, reg),
                COLUMNS[4]: _tokens(c_tok),
                COLUMNS[5]: _logged(c_tok),
                COLUMNS[6]: _steps(reg),
                COLUMNS[7]: ", ".join(map(str, reg.zero_grads)) or "none",
                COLUMNS[8]: " / ".join(
                    "exact" if e <= tolerance(reg.problem) else f"{e:.1e}" for e in finals
                ),
                COLUMNS[9]: TO_BE_EXACT.get(name, ""),
            }
        )
    return FrameworkTable(rows, versions(), ks.pop(), checks)
