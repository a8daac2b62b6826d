"""Audit a learner's own accumulation loop against the reference (lesson 08).

`al.audit(train_fn, ...)` runs the loop on copies and returns an `AuditReport`; the topic's other
names live beside it: `al.audit.CATALOGUE` holds the loops, right and wrong, that the lesson's
gallery and the tests share; `al.audit.plot_audit` draws a report.

How the folder reads: `auditor` (the entry point, `arguments` checks its input, `spec` says what
the reference does) → `runner` runs the loop on copies, with `instruments` recording and `guard`
bounding it in time and calls (`recording` holds what was seen) → detectors, one concern each:
`errors`, `data_checks`, `schedule`, `gradients` (with `hypotheses` and `scaler_log`; its
findings in `explain` and `unexplained`), `scaler_step`, `lr_schedule`, `memory`, `norm_layers` →
`findings` (codes, severities, the report), worded by `messages`, `messages_epochs` and `phrases`
(text as data). The loops: `catalogue` (with `loops`, `loops_epochs`, `loops_hidden`, `setups`),
shown neutrally by `gallery`, side by side by `table`; `overflow`: what GradScaler's inf check is
for; drawing: `plot`, `widget`.
"""

import sys
import types

from .._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(
    __name__,
    {
        "audit": "auditor",
        "CATALOGUE": "catalogue",
        "CatalogueLoop": "catalogue",
        "audit_setup": "setups",
        "catalogue_loop": "catalogue",
        "GALLERY": "gallery",
        "gallery_loop": "gallery",
        "compare_loops": "table",
        "overflow_window": "overflow",
        "CODES": "findings",
        "AuditReport": "findings",
        "Finding": "findings",
        "StepCheck": "findings",
        "plot_audit": "plot",
        "update_audit": "plot",
        "audit_explorer": "widget",
    },
)


class _AuditModule(types.ModuleType):
    """`al.audit` is both this topic and the function a learner calls: `al.audit(train_fn, ...)`
    runs the audit, `al.audit.catalogue_loop(...)` reaches the topic. (Importing any submodule binds
    the package as `accumlab.audit`, so a plain function of that name could not stay there.)"""

    def __call__(self, *args, **kwargs):
        from .auditor import audit

        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _AuditModule
