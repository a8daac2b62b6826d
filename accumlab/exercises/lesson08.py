"""Lesson 08 exercises: name a bug from its symptoms, then write loops the audit passes."""

from __future__ import annotations

from ..audit import CATALOGUE, CODES, audit, audit_setup
from . import exercise

MYSTERY = "mystery_loop"  # shown in exercise 08.1, left out of the lesson's gallery


def _clean(answer, setup: str, **options) -> str | None:
    if not callable(answer):
        return "give a function train_epoch(model, optimizer, batches, k, ...)"
    report = audit(answer, **audit_setup(setup, **options))
    if not report.findings:
        return None
    # name what is wrong, not how to fix it: the titles say the symptom only
    return "the audit still reports " + "; ".join(f"{f.code} ({f.title})" for f in report.findings)


@exercise("08.1", 1, "Name the bug of the mystery loop")
def _name_the_bug(answer):
    if not isinstance(answer, str) or answer not in CODES:
        return "answer with one of the codes in al.audit.CODES, as a string"
    if answer in CATALOGUE[MYSTERY].expected:
        return None
    return (
        "follow .grad from the end of the first window into the second: "
        "what is still in it when the second window's first backward runs?"
    )


@exercise("08.2", 2, "A token loop that weighs every token equally")
def _token_loop(answer):
    return _clean(answer, "tokens")


@exercise("08.3", 3, "Capstone: accumulation + GradScaler + clipping + scheduler")
def _full_loop(answer):
    return _clean(answer, "regression", max_norm=0.5, scheduler=True, scaler=True)
