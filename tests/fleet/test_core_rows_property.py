"""Fleet rows from the core equal the Python rules' rows (``tests/fleet/oracle_rows.py``) on
hostile lines drawn by hypothesis: usage values that are huge or out-of-64-bit integers, ``-0``,
``1e400``, strings, nested values, repeated and escaped keys (``"us\\u0061ge"``), lone
surrogates, roles that are not strings, ``message`` repeated or not an object, and timestamps
out of ``Date``'s range; with LF or CRLF line ends. (Lines drawn like these found the
out-of-64-bit integers that orjson reads as floats: ``test_core_rows_parity.py``'s
``ints_beyond_64_bits``.)"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from tests.fleet import oracle_rows  # noqa: E402
from tests.fleet.test_core_rows_parity import _diff, _entries_pair, _session, _stats_pair  # noqa: E402

NUMBERS = [
    "0",
    "-0",
    "-0.0",
    "1",
    "-1",
    "1.5",
    "0.1",
    "2.5e-3",
    "1E2",
    "1.0e+2",
    "100.0",
    "1e21",
    "1e308",
    "5e-324",
    "1e-400",
    "1e400",
    "-1e400",
    "9007199254740993",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "123456789012345678901234567890",
    "1" + "0" * 60,
]
OTHERS = ['"7"', '"x"', '"\\ud800"', "null", "true", "false", "[]", "[1]", "{}", '{"total":1}', "[[[[1]]]]"]
VALUE = st.sampled_from(NUMBERS + OTHERS)
USAGE_KEY = st.sampled_from(["input", "output", "cacheRead", "cacheWrite", "totalTokens", "inp\\u0075t", "cost"])
COST_KEY = st.sampled_from(["total", "input", "tot\\u0061l"])


@st.composite
def usage(draw) -> str:
    if draw(st.integers(0, 9)) == 0:
        return draw(VALUE)
    parts = []
    for key in draw(st.lists(USAGE_KEY, max_size=6)):
        if key == "cost" and draw(st.booleans()):
            inner = ",".join(f'"{k}":{draw(VALUE)}' for k in draw(st.lists(COST_KEY, max_size=3)))
            parts.append(f'"cost":{{{inner}}}')
        else:
            parts.append(f'"{key}":{draw(VALUE)}')
    return "{" + ",".join(parts) + "}"


ROLE = st.sampled_from(
    ['"assistant"', '"toolResult"', '"user"', '"custom"', '"ass\\u0069stant"', "1", "null", '{"a":1}', '"\\ud800"']
)
CONTENT = st.sampled_from(
    [
        "[]",
        '"x"',
        "null",
        '[{"type":"toolCall","name":"x"}]',
        '[{"type":"tool\\u0043all"}]',
        '[{"typ\\u0065":"toolCall"}]',
        '[{"type":"toolCall","type":"text"}]',
        '[1,null,"toolCall",[{"type":"toolCall"}]]',
        '[{"type":"text","text":"usage"}]',
        '{"type":"toolCall"}',
    ]
)
CONTENT_KEY = st.sampled_from(["content", "cont\\u0065nt"])
USAGE_NAME = st.sampled_from(["usage", "usage", "us\\u0061ge"])
TIMESTAMP = st.sampled_from(
    ["1767225600123", "true", "5", "-0", "1.5", "1e400", "8.64e15", "-8.64e15", "9e15", "null", "[1]", '"x"']
    + ['"2026-02-01T00:00:00Z"', '"+275760-09-13T00:00:00.000Z"', '"-271821-04-20T00:00:00.000Z"']
)


@st.composite
def body(draw) -> str:
    kind = draw(st.integers(0, 9))
    if kind < 7:
        key = draw(st.sampled_from(["message"] * 5 + ["mess\\u0061ge"]))
        members = [f'"role":{draw(ROLE)}', f'"{draw(CONTENT_KEY)}":{draw(CONTENT)}']
        for _ in range(draw(st.integers(0, 2))):
            members.append(f'"{draw(USAGE_NAME)}":{draw(usage())}')
        if draw(st.booleans()):
            members.append(f'"timestamp":{draw(TIMESTAMP)}')
        tail = draw(st.sampled_from(["", "", "", ',"message":null', ',"message":{"role":"user"}']))
        return f'{{"type":"message","{key}":{{{",".join(members)}}}{tail}}}'
    if kind < 9:
        t = draw(st.sampled_from(["compaction", "branch_summary", "usage", "custom_message", "compac\\u0074ion"]))
        return f'{{"type":"{t}","summary":"s","firstKeptEntryId":"e0","usage":{draw(usage())}}}'
    # a later repeated timestamp wins over the one the session helper writes
    return f'{{"type":"message","message":{{"role":"user","content":"hi"}},"timestamp":{draw(TIMESTAMP)}}}'


def _plain(t) -> list[dict]:
    """Rows with timestamps as integers (Python's datetime stops at year 9999; Date does not)."""
    cols = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in t.columns]
    return pa.table(cols, names=t.column_names).to_pylist()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(body(), min_size=1, max_size=8), st.booleans())
def test_core_rows_equal_the_python_rules_on_drawn_hostile_lines(bodies, crlf):
    from sessiontree.fleet import entries_schema

    with tempfile.TemporaryDirectory() as d:
        p = _session(Path(d), "x", bodies)
        if crlf:
            p.write_bytes(p.read_bytes().replace(b"\n", b"\r\n"))
        pair = _stats_pair(p)
        assert pair is not None
        got, want = pair
        assert _diff(got, want) == {}
        got, want = _entries_pair(p)
        if isinstance(want, dict) or isinstance(got, dict):
            assert got == want
            return
        g, w = _plain(got), _plain(oracle_rows.table(want, entries_schema()))
        assert len(g) == len(w)
        for a, b in zip(g, w):
            assert _diff(a, b) == {}
