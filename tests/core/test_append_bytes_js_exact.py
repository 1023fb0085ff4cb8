"""Appended entries are written with Pi's bytes: ``JSON.stringify``'s, not orjson's.

orjson keeps Python's float spelling (``100.0``, ``-0.0``, ``1e+16``) and insertion key order;
``JSON.stringify`` writes ``100``, ``0``, ``10000000000000000`` and enumerates array-index keys
(``"0"``, ``"42"``) first, ascending. Every path that turns a Python value into line bytes
(``dumps_entry``, ``Session._append_field`` for ``append_message`` and field dicts, entries
built in Python) must write what :func:`sessiontree._jsjson.js_stringify_bytes` writes, which is
what node writes. ``js_stringify_bytes`` is orjson's text through the Rust core's pass
(``_core.js_text``, JavaScript number text by ``ryu_js``), or the pure-Python writer
(``_slow_str``, numbers by ``js_number_to_string``) for what that pass leaves to it; the property
tests here keep the two equal.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree import Session, _core
from sessiontree import _jsjson
from sessiontree._jsjson import js_stringify_bytes
from sessiontree.session import dumps_entry

VALUES = [
    100.0,
    -0.0,
    1e21,
    1.5e300,
    5e-7,
    0.1,
    1e16,
    1e-5,
    1e-7,
    -2.5e-300,
    123456789012345680000.0,
    2**60,
    -(2**60),
    9007199254740993,
    [1.0, [2.0, {"x": -0.0, "y": [1e21, 0.5]}], 3],
    {"a": {"b": [100.0, {"c": 1.5e300}]}, "s": '100.0 -0.0 1e21 "1": {"0":'},
    {"b": 1, "1": 2, "0": 3},
    {"nested": [{"z": 1, "42": 2.0}]},
    {"4294967295": 1, "4294967294": 2, "01": 3, "-1": 4, "1.0": 5},
    "plain text",
    {"text": 'é😀\n\t"\\', "n": 7},
]

IDS = [repr(v)[:40] for v in VALUES]


def _last_line(s: Session) -> bytes:
    s.flush()
    return s.path.read_bytes().splitlines()[-1]


def _message(value) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 0, "value": value}


@pytest.fixture
def session(tmp_path):
    s = Session.create("/proj", session_dir=tmp_path)
    yield s
    s.close()


def _same_value(a, b) -> bool:
    """Equal as JSON values (floats and ints compare by value; -0.0 == 0)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same_value, a, b))
    if any(isinstance(x, int) and not isinstance(x, bool) and abs(x) > 2**53 for x in (a, b)):
        return float(a) == float(b)  # JSON.parse gives the nearest double
    return a == b


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_dumps_entry_is_js_stringify(value):
    assert dumps_entry(value) == js_stringify_bytes(value) == _python_writer(value)
    assert dumps_entry({"v": value}) == js_stringify_bytes({"v": value})


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_append_message_writes_js_bytes(session, value):
    msg = _message(value)
    session.append_message(msg)
    line = _last_line(session)
    assert line.endswith(b'"message":' + js_stringify_bytes(msg) + b"}")
    assert line == js_stringify_bytes(json.loads(line))
    back = Session.open(session.path).get_entry(session.leaf_id).raw["message"]
    assert _same_value(back, msg)


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_custom_entry_writes_js_bytes(session, value):
    session.append_custom_entry("ext", {"state": value})
    line = _last_line(session)
    assert b'"data":' + js_stringify_bytes({"state": value}) in line
    assert line == js_stringify_bytes(json.loads(line))
    back = Session.open(session.path).get_entry(session.leaf_id).raw["data"]
    assert _same_value(back, {"state": value})


@pytest.mark.parametrize("value", VALUES, ids=IDS)
def test_append_fields_writes_js_bytes(session, value):
    target = session.append_message(_message(0))
    session.append_context_edit(target, {"content": "x", "value": value})
    line = _last_line(session)
    assert line.endswith(b'"replacement":' + js_stringify_bytes({"content": "x", "value": value}) + b"}")
    assert line == js_stringify_bytes(json.loads(line))


def test_key_order_is_javascripts(session):
    session.append_message(_message({"b": 1, "1": 2, "0": 3}))
    line = _last_line(session)
    assert b'"value":{"0":3,"1":2,"b":1}' in line


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_writes_the_same_bytes(session):
    # the values through JSON.parse + JSON.stringify in node (the file's text is Pi's input)
    values = [v for v in VALUES if not (isinstance(v, int) and abs(v) > 2**53)]
    for v in values:
        session.append_message(_message(v))
    session.flush()
    lines = session.path.read_bytes().splitlines()[1:]
    script = (
        "const ls=require('fs').readFileSync(0,'utf8').split('\\n').filter(Boolean);"
        "process.stdout.write(ls.map(l=>JSON.stringify(JSON.parse(l))).join('\\n'))"
    )
    out = subprocess.run(["node", "-e", script], input=b"\n".join(lines), capture_output=True, check=True).stdout
    assert out.split(b"\n") == lines
    # and node's own spelling of the Python floats (not only a round trip of our text)
    floats = [100.0, -0.0, 1e21, 1.5e300, 5e-7, 0.1, 1e16, 1e-7, 123456789012345680000.0]
    src = "[" + ",".join(repr(f) for f in floats) + "]"
    node = subprocess.run(
        ["node", "-e", f"process.stdout.write(JSON.stringify({src}))"], capture_output=True, check=True
    ).stdout
    assert node == js_stringify_bytes(floats) == dumps_entry(floats)


# ==== the Rust pass and the Python writer: one rule, checked as a pair ====================

json_floats = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | json_floats | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.dictionaries(
            st.sampled_from(["a", "b", "0", "1", "10", "01", "x1"]) | st.text(max_size=3), kids, max_size=4
        )
    ),
    max_leaves=12,
)


def _python_writer(v) -> bytes:
    return _jsjson._slow_str(v).encode("utf-8", "surrogatepass")


@settings(max_examples=400, deadline=None)
@given(json_floats)
def test_rust_number_text_matches_python(x):
    assert _core.js_text(orjson.dumps(x)) == _python_writer(x) == js_stringify_bytes(x)
    assert _core.js_text(orjson.dumps([x, {"k": x}])) == _python_writer([x, {"k": x}])


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_rust_pass_matches_python_writer(v):
    try:
        raw = orjson.dumps(v)
    except (TypeError, orjson.JSONEncodeError):
        return  # lone surrogates, ints beyond 64 bits: the Python writer's alone
    fixed = _core.js_text(raw)
    if fixed is None:  # an array-index key: the Python writer orders the keys
        assert any(isinstance(d, dict) and any(_jsjson._is_array_index(k) for k in d) for d in _walk(v))
    else:
        assert fixed == _python_writer(v)
    assert dumps_entry(v) == js_stringify_bytes(v) == _python_writer(v)


def _walk(v):
    yield v
    if isinstance(v, dict):
        for x in v.values():
            yield from _walk(x)
    elif isinstance(v, list):
        for x in v:
            yield from _walk(x)


def test_unchanged_text_is_returned_as_it_is():
    raw = orjson.dumps({"role": "user", "content": '1.0 -0.0 "0":', "n": [1, -2, 30], "f": 0.5})
    assert _core.js_text(raw) is raw


def test_js_text_edge_spellings():
    assert _core.js_text(b"[-0.0,100.0,1e+21,1e+16,0.00001,1e-7]") == b"[0,100,1e+21,10000000000000000,0.00001,1e-7]"
    assert _core.js_text(b"18446744073709551615") == b"18446744073709552000"
    assert _core.js_text(b"9007199254740992") == b"9007199254740992"
    assert _core.js_text(b'{"0":1}') is None
    assert _core.js_text(b'{"4294967294":1}') is None
    assert _core.js_text(b'{"4294967295":1,"01":2,"-1":3,"":4}') == b'{"4294967295":1,"01":2,"-1":3,"":4}'
    assert _core.js_text(b'["0",{"a":"1"}]') == b'["0",{"a":"1"}]'  # strings that are values, not keys
    assert math.isclose(float(_core.js_text(b"1.5e+300")), 1.5e300)
