"""09.2 gives one hint to every wrong set of names: a hint that told the names apart would let
guesses walk to the answer (all four names → "drop this one" → …)."""

import itertools

import accumlab as al
from accumlab.coupling.aggregation import AGGREGATIONS


def test_every_wrong_set_gets_the_same_hint():
    names = sorted(AGGREGATIONS)
    messages = set()
    for r in range(len(names) + 1):
        for chosen in itertools.combinations(names, r):
            result = al.check("09.2", set(chosen))
            if set(chosen) == {"constant", "token_mean_global"}:
                assert result.ok, result.message
                continue
            assert not result.ok, chosen
            messages.add(result.message)
    assert len(messages) == 1, messages
    assert not any(name in next(iter(messages)) for name in names)
