"""Bad input at every public entry point of the topic folders: a clear error in accumlab's words,
never a hang, a silent result or an exception leaking from torch/matplotlib (see
tests/fuzz_harness.py for the verdicts, tests/test_fuzz_api.py for the core's table).

The cases live in one module per topic, tests/fuzz_topics/<topic>.py; all of them run in ONE
worker, so the table costs one start-up. test_every_public_callable_of_a_topic_has_a_case fails
when a topic (any name in `al.TOPICS`) has no table, or when its `__init__` table names a callable
that no case calls. See every verdict at once:
    python tests/fuzz_harness.py tests/test_fuzz_topics.py
"""

from __future__ import annotations

import importlib
import inspect

import pytest
from fuzz_harness import PASS, Worker
from fuzz_topics import (
    accumulation,
    audit,
    autograd,
    batchnorm,
    bookkeeping,
    coupling,
    dist,
    frameworks,
    memory,
    precision,
    scale,
    scaling,
)

import accumlab as al

TABLES = {
    "accumulation": accumulation,
    "autograd": autograd,
    "scaling": scaling,
    "batchnorm": batchnorm,
    "memory": memory,
    "precision": precision,
    "dist": dist,
    "audit": audit,
    "coupling": coupling,
    "bookkeeping": bookkeeping,
    "frameworks": frameworks,
    "scale": scale,
}
CASES = [c for table in TABLES.values() for c in table.CASES]

# Records accumlab hands back (lessons read their fields and never build one), and exceptions
NOT_ENTRY_POINTS = {
    "scaling": {"Weights", "WindowCheck", "Multiple"},
    "memory": {"Footprint", "Choice"},
    "precision": {"AmpTrace"},
    "dist": {"Plan"},
    "audit": {"AuditReport", "Finding", "StepCheck", "CatalogueLoop"},
    "bookkeeping": {"Schedule", "Run", "ResumeCheck", "TokenBudget"},
    "frameworks": {"FrameworkRun", "FrameworkTable", "StepCheck", "Problem"},
}


def _param(case):
    return pytest.param(case, id=case.id, marks=[pytest.mark.slow] if case.slow else [])


@pytest.fixture(scope="module")
def worker():
    w = Worker(__file__)
    yield w
    w.close()


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case, worker):
    result = worker.ask(case)
    assert result["verdict"] in PASS, f"{result['verdict']}: {result['detail']}"


def _takes_arguments(value) -> bool:
    try:
        return bool(inspect.signature(value).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: assume it takes some
        return True


def test_every_public_callable_of_a_topic_has_a_case():
    covered = {".".join(c.target.split(".")[:2]) for c in CASES}
    targets = {c.target for c in CASES}
    missing = [f"{topic} (no table)" for topic in al.TOPICS if topic not in TABLES]
    for topic in al.TOPICS:
        module = importlib.import_module(f"accumlab.{topic}")
        for name in module.__all__:
            value = getattr(module, name)
            if (
                not callable(value)
                or inspect.ismodule(value)
                or name in NOT_ENTRY_POINTS.get(topic, ())
            ):
                continue
            if inspect.isclass(value) and issubclass(value, BaseException):
                continue
            # nothing to get wrong in a call without arguments
            if _takes_arguments(value) and f"{topic}.{name}" not in covered:
                missing.append(f"{topic}.{name}")
            if inspect.isclass(value):  # what a learner calls on one: its methods with arguments
                missing += [m for m in _methods(topic, name, value) if m not in targets]
    assert not missing, f"public callables without a bad-input case: {missing}"


def _methods(topic: str, name: str, cls: type) -> list[str]:
    """`topic.Class.method` for each public method of `cls` taking an argument besides self;
    not `forward` (a module is called, and its class's cases call it)."""
    found = []
    for method, value in vars(cls).items():
        if method.startswith("_") or method == "forward" or not callable(value):
            continue
        try:
            takes = len(inspect.signature(value).parameters) > 1
        except (TypeError, ValueError):
            takes = True
        if takes:
            found.append(f"{topic}.{name}.{method}")
    return found


def test_the_tables_name_only_public_callables():
    """A case's target must exist: a renamed function would otherwise leave its cases testing
    nothing but an AttributeError."""
    wrong = []
    for case in CASES:
        obj = al
        for part in case.target.split("."):
            obj = getattr(obj, part, None)
        if obj is None:
            wrong.append(case.target)
    assert not wrong, f"cases whose target is not a public name: {sorted(set(wrong))}"
