"""Several catalogue loops audited side by side, as one table (lesson 08)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .._validate import one_of, sequence
from .catalogue import CATALOGUE
from .findings import ICONS, AuditReport


@dataclass
class LoopTable:
    """`reports[name]` for each loop, in order; shown as a table of steps and codes."""

    reports: dict[str, AuditReport] = field(default_factory=dict)

    def __getitem__(self, name: str) -> AuditReport:
        one_of("name", name, self.reports)
        return self.reports[name]

    def _repr_markdown_(self) -> str:
        rows = ["| loop | optimizer steps after micro-batches | findings |", "|---|---|---|"]
        for name, r in self.reports.items():
            codes = ", ".join(f"{ICONS[f.severity]} `{f.code}`" for f in r.findings) or "✅ clean"
            rows.append(f"| `{name}` | {', '.join(map(str, r.seen_steps)) or 'none'} | {codes} |")
        return "\n".join(rows)


def compare_loops(names: list[str]) -> LoopTable:
    """Audit each catalogue loop `names` on its own setup; a table of what each did. Lesson 08."""
    names = sequence("names", names)
    for name in names:
        one_of("names", name, CATALOGUE)
    return LoopTable({name: CATALOGUE[name].audit() for name in names})
