"""One home for how Pi's sums treat a usage field (``x + usage.input``, ``total += cost.total``):
:func:`sessiontree._jsjson.js_usage_number`, used by ``context.calculate_context_tokens`` and
``usage.UsageAccumulator`` (which had their own copies, ``context._num`` and ``usage._js_num``).

The rule: numbers add as they are (NaN and infinities included), ``null`` is 0, booleans are 0/1,
a missing field (``undefined``) and anything else is NaN. (JavaScript would concatenate a string
operand; Pi's usage fields are numbers or null, and the model keeps NaN for every other value.)
"""

from __future__ import annotations

import math

import pytest

from sessiontree import context, usage
from sessiontree._jsjson import JS_UNDEFINED, js_usage_number
from sessiontree.context import calculate_context_tokens
from sessiontree.usage import usage_totals_of_entries


def _same(a, b) -> bool:
    return (
        (math.isnan(a) and math.isnan(b)) if isinstance(a, float) and math.isnan(a) else (a == b and type(a) is type(b))
    )


CASES = [
    (None, 0),
    (False, 0),
    (True, 1),
    (0, 0),
    (7, 7),
    (-3, -3),
    (2.5, 2.5),
    (float("inf"), float("inf")),
    (float("-inf"), float("-inf")),
    (float("nan"), float("nan")),
    (10**30, 10**30),
    (JS_UNDEFINED, float("nan")),
    ("", float("nan")),
    ("5", float("nan")),
    ("abc", float("nan")),
    ([], float("nan")),
    ([1], float("nan")),
    ([[2]], float("nan")),
    ({}, float("nan")),
    ({"a": 1}, float("nan")),
    ({"total": {"n": 1}}, float("nan")),
]


@pytest.mark.parametrize("value,want", CASES, ids=[repr(c[0]) for c in CASES])
def test_the_rule(value, want):
    got = js_usage_number(value)
    assert _same(got, want), (value, got, want)
    if value is True or value is False:
        assert type(got) is int  # 0/1, not the bool itself


@pytest.mark.parametrize("value,want", CASES, ids=[repr(c[0]) for c in CASES])
def test_both_callers_use_it(value, want):
    ctx = calculate_context_tokens({"input": value, "output": 1, "cacheRead": 0, "cacheWrite": 0})
    assert _same(ctx, want + 1 if not math.isnan(want) else want) or (math.isinf(want) and ctx == want)
    entry = {
        "type": "message",
        "id": "a",
        "parentId": None,
        "message": {
            "role": "assistant",
            "usage": {"input": value, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": value}},
        },
    }
    totals = usage_totals_of_entries([entry])
    for got in (totals.input, totals.cost):
        assert _same(got, want), (value, got)


def test_no_module_keeps_its_own_copy():
    assert not hasattr(context, "_num")
    assert not hasattr(usage, "_js_num")
