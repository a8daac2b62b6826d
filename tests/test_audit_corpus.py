"""al.audit on real loops from public code: each gets exactly the verdict an expert wrote down
before the audit ran (tests/audit_corpus: sources cited beside every loop)."""

import pytest
from audit_corpus import CORPUS

import accumlab as al


@pytest.mark.parametrize("entry", CORPUS, ids=[entry.name for entry in CORPUS])
def test_real_loop_gets_the_experts_verdict(entry):
    report = al.audit(entry.fn, **entry.kwargs())
    assert report.codes == entry.expected, f"{entry.why}\n{report}"
    # real loops accumulate through their own backward passes: none is read as written-in
    assert report.foreign_gradient == "", report.foreign_gradient


def test_the_corpus_is_big_and_varied():
    assert len(CORPUS) >= 15
    assert len({entry.name for entry in CORPUS}) == len(CORPUS)
    buggy = [entry for entry in CORPUS if entry.expected]
    clean = [entry for entry in CORPUS if not entry.expected]
    assert len(buggy) >= 10 and len(clean) >= 3
