"""What an audit reports: findings with a stable code, a plain sentence and measured evidence (lesson 08)."""

from __future__ import annotations

from dataclasses import dataclass, field

# Stable codes → (severity, short title). Severities:
#   bug         the loop trains differently from the reference, and we know why
#   policy      a documented choice for the short last window that differs from the one stated
#   caveat      the loop is right, but accumulation cannot match the big batch here (BatchNorm),
#               or it ran here otherwise than where it is meant to run (autocast switched off)
#   note        the loop is right, but wastes memory or compute
#   unverified  the check could not tell a correct loop from a buggy one here, and says how to
#   unexplained the loop differs from the reference in a way no combination of known bugs explains
#   error       the function could not be audited: it raised, ran away, did nothing, made NaN
CODES: dict[str, tuple[str, str]] = {
    "LOSS_NOT_DIVIDED": ("bug", "loss not divided by the window's size"),
    "LOSS_DIVIDED_TWICE": ("bug", "loss divided by the window's size twice"),
    "ZERO_GRAD_IN_WINDOW": ("bug", "gradients zeroed inside the window"),
    "GRADS_NEVER_ZEROED": ("bug", "gradients never zeroed between optimizer steps"),
    "ZERO_GRAD_BEFORE_STEP": ("bug", "gradients zeroed between the last backward and the step"),
    "STEP_EVERY_MICRO_BATCH": ("bug", "optimizer stepped after every micro-batch"),
    "OFF_BY_ONE_SCHEDULE": ("bug", "optimizer steps at the wrong micro-batches"),
    "LAST_WINDOW_DROPPED": ("policy", "short last window never reaches the optimizer"),
    "LAST_WINDOW_UNDERWEIGHTED": ("policy", "short last window divided by k"),
    "LAST_WINDOW_AVERAGED": ("policy", "short last window averaged, divide_by_k stated"),
    "LAST_WINDOW_KEPT": ("policy", "short last window stepped, drop stated"),
    "LAST_WINDOW_CARRIED": ("bug", "short last window added to the next epoch's first step"),
    "WINDOWS_CROSS_EPOCHS": ("policy", "windows continue across epochs"),
    "CARRIED_WINDOW_ZEROED": ("bug", "a window across epochs erased in part when an epoch starts"),
    "MEAN_OF_MEANS": ("bug", "mean of per-micro-batch means"),
    "CLIP_PER_MICRO_BATCH": ("bug", "gradients clipped inside the window"),
    "NOT_CLIPPED": ("bug", "gradients not clipped"),
    "SCHEDULER_PER_MICRO_BATCH": ("bug", "scheduler stepped every micro-batch"),
    "SCHEDULER_BEFORE_STEP": ("bug", "scheduler stepped before the optimizer"),
    "SCHEDULER_STEPS_WRONG": ("bug", "scheduler stepped a wrong number of times"),
    "UNSCALE_MISUSE": ("bug", "GradScaler.unscale_ misused"),
    "SCALER_MISUSE": ("bug", "GradScaler called in the wrong order"),
    "SCALER_STEP_SKIPPED": (
        "bug",
        "optimizer.step() without scaler.step: its inf/NaN check bypassed",
    ),
    "GRAPHS_KEPT_ALIVE": ("bug", "autograd graphs kept alive across windows"),
    "BATCH_MODIFIED": ("bug", "micro-batches modified in place"),
    "BATCHNORM_STATS": ("caveat", "BatchNorm sees micro-batch statistics"),
    "AUTOCAST_DISABLED": ("caveat", "torch.autocast switched off: checked in full precision"),
    "FORWARD_WITHOUT_BACKWARD": ("note", "forward with gradients on that backward never used"),
    "SCALER_SKIPPED_STEPS": ("note", "GradScaler skipped updates whose gradients overflowed"),
    "CLIPPED_ANOTHER_WAY": ("note", "clipped right, without clip_grad_norm_'s epsilon"),
    "GRADIENT_NOT_VERIFIED": ("unverified", "gradient scale or pattern not verifiable here"),
    "UNEXPLAINED_GRADIENT": ("unexplained", "gradient differs from the reference"),
    "UNEXPLAINED_SCHEDULE": ("unexplained", "optimizer steps at unexpected micro-batches"),
    "NON_FINITE": ("error", "NaN or infinite values"),
    "STEP_RAISED": ("error", "the function raised an exception"),
    "RUNAWAY_LOOP": ("error", "the function was stopped: too many calls or too long"),
    "NO_STEPS": ("error", "the function never stepped the optimizer"),
    "FORWARD_NOT_SEEN": ("error", "gradient from a forward the audit could not see"),
    "MODEL_CHANGED": ("error", "the function changed the model's parameters' shapes"),
}
BLOCKING = ("bug", "unverified", "unexplained", "error")  # severities that make a report not ok
ICONS = {
    "bug": "❌",
    "policy": "ℹ️",
    "caveat": "⚠️",
    "note": "💬",
    "unverified": "🔍",
    "unexplained": "❓",
    "error": "⛔",
}
# What no single-process audit can see: said in every report.
OUT_OF_SCOPE = (
    "DDP no_sync(), gradient synchronisation and token counts summed across ranks "
    "(num_items_in_batch): a single process has no ranks"
)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        shown = ", ".join(_fmt(v) for v in value[:8])
        return f"[{shown}{', …' if len(value) > 8 else ''}]"
    return str(value)


@dataclass(frozen=True)
class Finding:
    """One thing the audit found: `code` (stable, see CODES), `message` (a plain sentence with the
    measured numbers in it), `evidence` (name → measured value) and the optimizer `steps` concerned."""

    code: str
    message: str
    evidence: dict = field(default_factory=dict)
    steps: tuple[int, ...] = ()

    def __post_init__(self):
        if self.code not in CODES:
            raise ValueError(f"code must be one of {', '.join(CODES)}, got {self.code!r}")

    @property
    def severity(self) -> str:
        return CODES[self.code][0]

    @property
    def title(self) -> str:
        return CODES[self.code][1]

    def __str__(self) -> str:
        lines = [f"{ICONS[self.severity]} {self.code} ({self.severity}): {self.message}"]
        lines += [f"    {k}: {_fmt(v)}" for k, v in self.evidence.items()]
        return "\n".join(lines)


@dataclass(frozen=True)
class StepCheck:
    """How one optimizer step compared with the reference: `window` lists the micro-batches forwarded
    since the previous step; `rel_error` is ‖seen − reference‖/‖reference‖ (None when the window is
    not one the reference has, so no gradient comparison applies); `explained_by` a code or None."""

    index: int
    window: tuple
    rel_error: float | None
    explained_by: str | None = None  # codes joined by "+" (bugs compose)


@dataclass
class AuditReport:
    """`al.audit(...)`'s answer (lesson 08): `.findings`, `.ok` (no bug, unverifiable check,
    unexplained difference or error; policies, caveats and notes allowed), `.codes`, and the per-step comparison in `.checks`."""

    name: str
    micro_batches: int
    accumulation_steps: int
    expected_steps: tuple[int, ...]  # micro-batches forwarded when each reference step happens
    seen_steps: tuple[int, ...]  # the same, measured on the learner's loop
    findings: list[Finding] = field(default_factory=list)
    checks: list[StepCheck] = field(default_factory=list)
    zero_grads: tuple[int, ...] = ()  # forwards done when each zero_grad call happened
    scheduler_steps: tuple[int, ...] = ()
    rtol: float = 1e-9  # relative L2 difference still counted as a match
    dtype: str = "float64"
    last_window: str = "divide_by_actual"  # the policy the reference applies to a short window
    seconds: float = 0.0
    epochs: int = 1  # epochs the loop was asked to train (micro_batches is per epoch)
    # the most forwards whose graphs were alive together before one backward used them: 1 when
    # every micro-batch's backward follows its forward, k for one backward per window
    graphs_together: int = 0
    # each compared step's reference gradient norm before clipping (what max_norm is measured on)
    norms_before_clipping: list[float] = field(default_factory=list)
    # where a report without blocking findings saw a gradient that the model's own backward
    # passes did not put there (computed elsewhere, written into .grad): "" when none
    foreign_gradient: str = ""

    @property
    def ok(self) -> bool:
        return not any(f.severity in BLOCKING for f in self.findings)

    @property
    def codes(self) -> set[str]:
        return {f.code for f in self.findings}

    def __getitem__(self, code: str) -> Finding:
        for f in self.findings:
            if f.code == code:
                return f
        raise KeyError(f"no finding {code!r}; found: {sorted(self.codes) or 'none'}")

    def _header(self) -> str:
        epochs = f"{self.epochs} epochs of " if self.epochs > 1 else ""
        return (
            f"Audit of {self.name}: {epochs}{self.micro_batches} micro-batches, "
            f"k = {self.accumulation_steps} → {len(self.expected_steps)} optimizer steps expected, "
            f"{len(self.seen_steps)} seen."
        )

    def scope(self) -> str:
        """What this audit checked, at which tolerance, and what it cannot see."""
        return (
            f"Scope: one process, {self.epochs} epoch{'s' if self.epochs > 1 else ''}, "
            f"{self.dtype} (match tolerance rtol = {self.rtol:g}), "
            f"last_window = {self.last_window!r}. Checked: when the optimizer steps; each step's "
            "gradient (zeroing, loss scaling, window policy, clipping, GradScaler calls); the "
            "scheduler; graphs kept alive; only forwards that call the model itself, model(x), "
            f"are seen. Out of reach: {OUT_OF_SCOPE}."
        )

    def _verdict(self) -> str:
        if not self.findings:
            return "✅ clean: every optimizer step saw the reference gradient, on schedule."
        if self.ok:
            kinds = sorted({f.severity for f in self.findings})
            return f"✅ no bug in the loop; read the {' and '.join(kinds)} finding(s) below."
        return f"{len(self.findings)} finding(s):"

    def __str__(self) -> str:
        return "\n".join([self._header(), self.scope(), self._verdict(), *map(str, self.findings)])

    def _repr_markdown_(self) -> str:
        out = [f"**{self._header()}**", "", f"*{self.scope()}*", "", self._verdict(), ""]
        for f in self.findings:
            out.append(f"- {ICONS[f.severity]} **`{f.code}`** ({f.severity}): {f.message}")
            out += [f"  - {k}: `{_fmt(v)}`" for k, v in f.evidence.items()]
        return "\n".join(out)
