"""JavaScript semantics: JSON.stringify, string.length, Number#toString, Date.parse, the default
sort order of strings, UTF-16 prefixes and Object.entries."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree._jsjson import (
    JS_UNDEFINED,
    js_date_parse,
    js_len,
    js_number_to_string,
    js_object_entries,
    js_stringify,
    js_stringify_bytes,
    js_stringify_len,
    js_to_string,
    js_utf16_key,
    js_utf16_prefix,
)

# Any code point, lone surrogates included (json.loads can produce them).
CHARS = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
TEXT = st.text(CHARS, max_size=30)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.one_of(TEXT, st.integers(0, 20).map(str)), children, max_size=5),
    ),
    max_leaves=25,
)
NODE = shutil.which("node")


# ==== numbers ======================================================================


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e16, "10000000000000000"),
        (1.5e-7, "1.5e-7"),
        (1e-6, "0.000001"),
        (7.5e-6, "0.0000075"),
        (123.456, "123.456"),
        (5e-324, "5e-324"),
        (2**53 + 1, "9007199254740992"),
        (2**64, "18446744073709552000"),
        (10**21, "1e+21"),
    ],
)
def test_numbers_format_like_number_to_string(value, text):
    assert js_number_to_string(value) == text
    assert js_stringify(value) == text
    assert js_stringify([value]) == f"[{text}]"


def test_non_finite_numbers_become_null():
    assert js_stringify([math.nan, math.inf, -math.inf]) == "[null,null,null]"


# ==== strings ======================================================================


def test_strings_escape_only_quote_backslash_and_control_characters():
    s = "".join(chr(i) for i in range(0x20)) + '"\\/\x7f\u2028é😀'
    expected = (
        '"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r'
        "\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018"
        '\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\\"\\\\/\x7f\u2028é😀"'
    )
    assert js_stringify(s) == expected


def test_lone_surrogates_are_written_as_lowercase_escapes():
    assert js_stringify({"t": "a\ud83db\udc00"}) == '{"t":"a\\ud83db\\udc00"}'
    assert js_stringify_bytes("\udfff") == b'"\\udfff"'


def test_a_surrogate_pair_in_a_python_str_is_one_character_to_javascript():
    assert js_stringify("\ud83d\ude00") == '"😀"'


# ==== objects ======================================================================


def test_key_order_is_kept_but_array_index_keys_come_first():
    assert js_stringify({"b": 1, "a": 2}) == '{"b":1,"a":2}'
    assert js_stringify({"b": 1, "10": 2, "2": 3, "01": 4, "-1": 5}) == '{"2":3,"10":2,"b":1,"01":4,"-1":5}'
    assert js_stringify({"4294967295": 1, "4294967294": 2}) == '{"4294967294":2,"4294967295":1}'


def test_undefined_values_are_omitted_from_objects():
    assert js_stringify({"a": JS_UNDEFINED, "b": None}) == '{"b":null}'


def test_js_to_string():
    assert [js_to_string(v) for v in (None, JS_UNDEFINED, True, 3.0, [1, None, "a"], {})] == [
        "null",
        "undefined",
        "true",
        "3",
        "1,,a",
        "[object Object]",
    ]


# ==== properties =====================================================================


def _js_view(value):
    """What JSON.parse(JSON.stringify(value)) gives back, as Python compares it: every
    number as a double (NaN/Infinity as null), surrogate pairs joined."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if isinstance(value, list):
        return [_js_view(v) for v in value]
    return {_js_view(k): _js_view(v) for k, v in value.items()}


@given(JSON_VALUES)
def test_stringify_round_trips_through_json_loads(value):
    text = js_stringify(value)
    assert _js_view(json.loads(text)) == _js_view(value)
    assert js_stringify_bytes(value) == text.encode("utf-8")


@given(JSON_VALUES)
def test_stringify_length_is_utf16_length_of_the_text(value):
    assert js_stringify_len(value) == js_len(js_stringify(value))


@given(
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text()),
        lambda c: st.one_of(st.lists(c), st.dictionaries(st.text().filter(lambda k: not k.isdigit()), c)),
        max_leaves=20,
    )
)
def test_stringify_equals_compact_json_dumps_without_floats_or_surrogates(value):
    assert js_stringify(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@given(st.text(CHARS))
def test_js_len_counts_utf16_code_units(text):
    assert js_len(text) == sum(2 if ord(c) > 0xFFFF else 1 for c in text)


# ==== Date.parse =======================================================================


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2026-01-16T03:12:09.462Z", 1768533129462),
        ("2026-07-20T11:00:00Z", 1784545200000),
        ("2026-01-01", 1767225600000),
        ("2026-01", 1767225600000),
        ("2026", 1767225600000),
        ("2026-01-01T00:00Z", 1767225600000),
        ("2026-01-01T05:30:00+05:30", 1767225600000),
        ("2025-12-31T19:00:00-05:00", 1767225600000),
        ("2026-01-01T00:00:00.123456Z", 1767225600123),
        ("2026-01-01T00:00:00.1Z", 1767225600100),
        ("2025-12-31T24:00:00Z", 1767225600000),
        ("2026-02-31T00:00:00Z", 1772496000000),
        ("+002026-01-01T00:00:00Z", 1767225600000),
        ("1970-01-01T00:00:00.000Z", 0),
        ("-000001-01-01T00:00:00Z", -62198755200000),
        ("+275760-09-13T00:00:00.000Z", 8.64e15),
    ],
)
def test_date_parse_iso_strings(text, ms):
    assert js_date_parse(text) == ms


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "2026-13-01",
        "2026-01-32",
        "2026-01-01T25:00Z",
        "2026-01-01T24:00:01Z",
        "2026-01-01T00:60Z",
        "-000000-01-01",
        "+275760-09-13T00:00:00.001Z",
        "2026-01-01T03:12:09+01",
    ],
)
def test_date_parse_invalid_strings_are_nan(text):
    assert math.isnan(js_date_parse(text))


def test_date_of_non_strings_follows_new_date():
    assert js_date_parse(None) == 0
    assert math.isnan(js_date_parse())
    assert math.isnan(js_date_parse(JS_UNDEFINED))
    assert js_date_parse(1768533129462) == 1768533129462
    assert js_date_parse(1.9) == 1
    assert js_date_parse(True) == 1
    assert math.isnan(js_date_parse({}))
    assert math.isnan(js_date_parse(9e15))


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)))
def test_date_parse_agrees_with_python_datetime(dt):
    dt = dt.replace(microsecond=dt.microsecond // 1000 * 1000, tzinfo=timezone.utc)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    text = f"{dt.year:04d}" + text[text.index("-") :]
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    assert js_date_parse(text) == (dt - epoch) // timedelta(milliseconds=1)


# ==== UTF-16 sort order, prefixes, Object.entries =====================================


def test_utf16_key_sorts_like_javascripts_default_sort():
    # U+FF46 is above U+D83D (the high surrogate of U+1F600) in UTF-16, below it as a code point
    names = ["\uff46ull.txt", "\U0001f600.md", "b", "B", "\ue000"]
    assert sorted(names, key=js_utf16_key) == ["B", "b", "\U0001f600.md", "\ue000", "\uff46ull.txt"]
    assert sorted(names) == ["B", "b", "\ue000", "\uff46ull.txt", "\U0001f600.md"]
    assert js_utf16_key("a\U0001f600") == b"\x00a\xd8\x3d\xde\x00"
    assert js_utf16_key("\ud800") == b"\xd8\x00"  # a lone surrogate is one unit


@given(st.lists(TEXT, max_size=8))
def test_utf16_key_orders_by_code_units(texts):
    def units(t):
        raw = t.encode("utf-16-be", "surrogatepass")
        return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]

    assert sorted(texts, key=js_utf16_key) == sorted(texts, key=units)


@pytest.mark.parametrize(
    ("text", "units", "prefix"),
    [
        ("abc", 0, ""),
        ("abc", 2, "ab"),
        ("abc", 9, "abc"),
        ("a\U0001f600b", 1, "a"),
        ("a\U0001f600b", 2, "a"),  # never half a surrogate pair
        ("a\U0001f600b", 3, "a\U0001f600"),
        ("a\U0001f600b", 4, "a\U0001f600b"),
        ("\ud800x", 1, "\ud800"),  # a lone surrogate counts 1
    ],
)
def test_utf16_prefix(text, units, prefix):
    assert js_utf16_prefix(text, units) == prefix


@given(TEXT, st.integers(0, 70))
def test_utf16_prefix_is_the_longest_whole_character_prefix(text, units):
    prefix = js_utf16_prefix(text, units)
    assert text.startswith(prefix) and js_len(prefix) <= units
    if prefix != text:
        assert js_len(text[: len(prefix) + 1]) > units


def test_object_entries():
    assert js_object_entries({"b": 1, "a": [2]}) == [("b", 1), ("a", [2])]
    assert js_object_entries(["x", None]) == [("0", "x"), ("1", None)]
    assert js_object_entries("a\U0001f600") == [("0", "a"), ("1", "\ud83d"), ("2", "\ude00")]
    assert js_object_entries("") == []
    assert [js_object_entries(v) for v in (0, 1.5, True, False)] == [[], [], [], []]


@pytest.mark.parametrize("value", [None, JS_UNDEFINED])
def test_object_entries_of_null_throws_the_callers_error(value):
    with pytest.raises(TypeError, match="^TypeError: Cannot convert undefined or null to object$"):
        js_object_entries(value)

    class Mine(Exception):
        pass

    with pytest.raises(Mine, match="^TypeError: Cannot convert undefined or null to object$"):
        js_object_entries(value, Mine)


def test_compaction_uses_the_js_helpers():
    from sessiontree.compaction import (
        FileOperations,
        SerializationError,
        _truncate_for_summary,
        compute_file_lists,
        serialize_conversation,
    )

    ops = FileOperations(read={"\uff46.txt": None, "\U0001f600.md": None, "a": None}, edited={"a": None})
    assert compute_file_lists(ops) == (["\U0001f600.md", "\uff46.txt"], ["a"])
    assert _truncate_for_summary("ab\U0001f600cd", 3) == "ab\n\n[... 3 more characters truncated]"
    call = {"role": "assistant", "content": [{"type": "toolCall", "name": "f", "arguments": "hi"}]}
    assert serialize_conversation([call]) == '[Assistant tool calls]: f(0="h", 1="i")'
    with pytest.raises(SerializationError, match="Cannot convert undefined or null to object"):
        serialize_conversation([{"role": "assistant", "content": [{"type": "toolCall", "name": "f"}]}])


# ==== against a real JavaScript engine (when node is installed) ===========================


def _node(script: str, payload) -> object:
    out = subprocess.run(
        [NODE, "-e", f"const v=JSON.parse(require('fs').readFileSync(0,'utf8'));{script}"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        env={"TZ": "UTC", "PATH": "/usr/bin:/bin"},
    )
    return json.loads(out.stdout)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=50, max_size=50))
def test_number_to_string_matches_node(values):
    assert [js_number_to_string(v) for v in values] == _node("console.log(JSON.stringify(v.map(String)))", values)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@settings(max_examples=10, deadline=None)
@given(st.lists(JSON_VALUES, min_size=10, max_size=10))
def test_stringify_matches_node(values):
    # Lone surrogates cannot travel through the pipe as JSON text, so send escaped JSON.
    payload = [json.dumps(v, ensure_ascii=True, allow_nan=False) for v in values if _finite(v)]
    expected = _node("console.log(JSON.stringify(v.map(s => JSON.stringify(JSON.parse(s)))))", payload)
    assert [js_stringify(json.loads(p)) for p in payload] == expected


def _finite(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(map(_finite, value))
    if isinstance(value, dict):
        return all(map(_finite, value.values()))
    return True


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@settings(max_examples=10, deadline=None)
@given(st.lists(TEXT, min_size=10, max_size=10))
def test_utf16_key_and_object_entries_match_node(texts):
    payload = [json.dumps(t, ensure_ascii=True) for t in texts]  # lone surrogates travel escaped
    expected = _node(
        "const t=v.map(s=>JSON.parse(s));console.log(JSON.stringify([[...t].sort(), t.map(s=>Object.entries(s))]))",
        payload,
    )
    assert [sorted(texts, key=js_utf16_key), [[list(e) for e in js_object_entries(t)] for t in texts]] == expected
