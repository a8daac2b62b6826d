"""Audit a learner's own accumulation loop against the reference (lesson 08).

`audit` runs the loop on a copy and returns an `AuditReport`; `CATALOGUE` holds the loops, right
and wrong, that the lesson's gallery and the tests share; `plot_audit` draws a report.
"""

from .auditor import audit
from .catalogue import CATALOGUE, CatalogueLoop, audit_setup, catalogue_loop
from .findings import CODES, AuditReport, Finding, StepCheck
from .plot import plot_audit
from .widget import audit_explorer

__all__ = [
    "CATALOGUE",
    "CODES",
    "AuditReport",
    "CatalogueLoop",
    "Finding",
    "StepCheck",
    "audit",
    "audit_explorer",
    "audit_setup",
    "catalogue_loop",
    "plot_audit",
]
