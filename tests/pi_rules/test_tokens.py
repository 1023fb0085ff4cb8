"""Pi's ``estimateTokens``: per-role character counts, UTF-16 units, and where Pi throws."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import goldens

from sessiontree._jsjson import js_len, js_stringify
from sessiontree.tokens import EstimateError, estimate_tokens

TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()))


# ==== roles ======================================================================


def test_user_string_content_counts_utf16_units():
    assert estimate_tokens({"role": "user", "content": "abcd"}) == 1
    assert estimate_tokens({"role": "user", "content": "abcde"}) == 2
    assert estimate_tokens({"role": "user", "content": "😀😀"}) == 1  # 4 UTF-16 units
    assert estimate_tokens({"role": "user", "content": "e\u0301"}) == 1
    assert estimate_tokens({"role": "user", "content": ""}) == 0


def test_content_blocks_count_text_and_4800_chars_per_image():
    content = [
        {"type": "text", "text": "12345678"},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        {"type": "text", "text": ""},
        {"type": "other", "text": "ignored"},
    ]
    for role in ("user", "custom", "toolResult"):
        assert estimate_tokens({"role": role, "content": content}) == (8 + 4800) // 4


def test_assistant_counts_text_thinking_and_tool_call_json():
    args = {"path": "a/b.ts", "n": 1.0, "q": 'say "hi"\n'}
    message = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "ok"},
            {"type": "toolCall", "id": "t1", "name": "read", "arguments": args},
        ],
    }
    chars = 3 + 2 + 4 + js_len(js_stringify(args))
    assert js_stringify(args) == '{"path":"a/b.ts","n":1,"q":"say \\"hi\\"\\n"}'
    assert estimate_tokens(message) == math.ceil(chars / 4)


def test_assistant_string_content_iterates_characters_and_counts_nothing():
    assert estimate_tokens({"role": "assistant", "content": "a string"}) == 0


def test_bash_execution_and_summaries():
    assert estimate_tokens({"role": "bashExecution", "command": "ls", "output": "a\nb"}) == 2
    assert estimate_tokens({"role": "branchSummary", "summary": "x" * 9}) == 3
    assert estimate_tokens({"role": "compactionSummary", "summary": "x" * 8}) == 2


def test_system_counts_content_sections_and_tools_added():
    tools = [{"name": "read", "description": "Read", "parameters": {}}]
    message = {
        "role": "system",
        "content": "base",
        "sections": {"a": "1234", "gone": None, "empty": ""},
        "toolsAdded": tools,
        "toolsRemoved": [{"name": "write"}],
    }
    assert estimate_tokens(message) == math.ceil((4 + 4 + len(js_stringify(tools))) / 4)


def test_unknown_roles_and_non_dicts_count_zero():
    assert estimate_tokens({"role": "developer", "content": "x" * 100}) == 0
    assert estimate_tokens({"content": "x" * 100}) == 0
    assert estimate_tokens("just a string") == 0


# ==== where Pi throws =============================================================


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"role": "user", "content": None}, "TypeError: content is not iterable"),
        ({"role": "system", "content": None}, "TypeError: content is not iterable"),
        ({"role": "toolResult"}, "TypeError: content is not iterable"),
        ({"role": "assistant", "content": None}, "TypeError: assistant.content is not iterable"),
        ({"role": "assistant"}, "TypeError: assistant.content is not iterable"),
        (
            {"role": "assistant", "content": [{"type": "toolCall", "name": "read"}]},
            "TypeError: Cannot read properties of undefined (reading 'length')",
        ),
        (
            {"role": "assistant", "content": [{"type": "text"}]},
            "TypeError: Cannot read properties of undefined (reading 'length')",
        ),
        (
            {"role": "user", "content": [None]},
            "TypeError: Cannot read properties of null (reading 'type')",
        ),
        (
            {"role": "bashExecution", "command": "ls"},
            "TypeError: Cannot read properties of undefined (reading 'length')",
        ),
        (None, "TypeError: Cannot read properties of null (reading 'role')"),
    ],
)
def test_malformed_messages_raise_pi_type_errors(message, error):
    with pytest.raises(EstimateError) as info:
        estimate_tokens(message)
    assert str(info.value) == error == info.value.pi_error


def test_non_numeric_length_gives_nan_like_javascript():
    assert math.isnan(estimate_tokens({"role": "user", "content": [{"type": "text", "text": 5}]}))


# ==== properties ==================================================================


@given(TEXT)
def test_user_estimate_is_ceil_of_utf16_units_over_four(text):
    units = sum(2 if ord(c) > 0xFFFF else 1 for c in text)
    assert estimate_tokens({"role": "user", "content": text}) == math.ceil(units / 4)


@given(st.lists(TEXT, max_size=5))
def test_text_blocks_add_up(texts):
    content = [{"type": "text", "text": t} for t in texts]
    assert estimate_tokens({"role": "toolResult", "content": content}) == math.ceil(sum(map(js_len, texts)) / 4)


# ==== legacy goldens (structural) ====================================================

LEGACY = [n for n in goldens.golden_ids() if (goldens.load_case(n).golden.get("open") or {}).get("migrated")]


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_files_path_message_tokens_by_position(name):
    """v1/v2 files: messages are unchanged by migration except ``hookMessage`` -> ``custom``;
    v1 ids are invented by Pi, so compare ``[role, tokens]`` by position."""
    golden = goldens.load_case(name).golden
    folder, stem = name.split("/", 1)
    loaded = goldens.reference_entries(goldens.session_file(folder, stem))
    assert loaded is not None
    entries = [e for e in loaded[1] if not (isinstance(e, dict) and e.get("type") == "session")]
    if all(isinstance(e, dict) and "id" not in e for e in entries):
        path = entries  # v1: Pi chains every entry to the previous one
    else:
        by_id = goldens.index_by_id(entries)
        path = [by_id[i] for i in golden["path"]["ids"]]
    got = []
    for e in path:
        if isinstance(e, dict) and e.get("type") == "message":
            message = e.get("message")
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                message = dict(message, role="custom")
            got.append([message.get("role"), goldens.pi_result(estimate_tokens, message)])
    assert got == [[role, tokens] for _, role, tokens in golden["path_message_tokens"]]


# ==== a `length` that is not a number: JavaScript's `+` (values checked with node 20) =========

_LENGTHS = [
    (["x"], "nan"),  # 0 + "x" = "0x": not a number
    (["1"], 1),  # "01" -> 1 -> ceil(0.25)
    (["1", 4], 4),  # "01" + 4 = "014" -> 14 / 4 = 3.5 -> 4
    ([None], 0),
    ([True], 1),
    ([[5]], 2),  # "0" + "5" = "05"
    ([{"a": 1}], "nan"),  # "0[object Object]"
    ([1e308, 1e308], "inf"),
    (["x10"], 4),  # "0x10" = 16
    ([" 12 "], "nan"),
    (["e5"], 0),  # "0e5"
    ([[1, [2, 3]]], "nan"),  # "01,2,3"
    ([4, "1"], 11),  # "41"
    ([False, "0b11"], "nan"),  # 0 + false = 0, then "00b11"
    ([[]], 0),  # "0"
    ([["a"]], "nan"),
    ([[None]], 0),  # "0"
    (["1", {"valueOf": 1}], "nan"),  # "01[object Object]"
]


def _check(got, want):
    if want == "nan":
        assert isinstance(got, float) and math.isnan(got)
    elif want == "inf":
        assert got == math.inf
    else:
        assert got == want and isinstance(got, int)


@pytest.mark.parametrize(("lengths", "want"), _LENGTHS)
def test_a_length_of_any_json_type_adds_as_javascript_does(lengths, want):
    # a text block whose `text` is an object with a `length` crashed (TypeError: float + str)
    blocks = [{"type": "text", "text": {"length": n}} for n in lengths]
    _check(estimate_tokens({"role": "assistant", "content": blocks}), want)
    _check(estimate_tokens({"role": "user", "content": blocks}), want)


def test_an_image_after_a_string_length_is_concatenated():
    # "0" + "1" = "01", then + 4800 = "014800" -> 14800 / 4
    msg = {"role": "user", "content": [{"type": "text", "text": {"length": "1"}}, {"type": "image"}]}
    assert estimate_tokens(msg) == 3700


def test_a_tool_call_name_length_that_is_a_string_concatenates_first():
    # chars += name.length + JSON.stringify(arguments).length: "1" + 2 = "12", 0 + "12" = "012"
    msg = {"role": "assistant", "content": [{"type": "toolCall", "name": {"length": "1"}, "arguments": {}}]}
    assert estimate_tokens(msg) == 3


def test_an_object_with_its_own_to_string_throws_as_javascript_does():
    for length in ({"toString": 1}, [{"toString": "x"}]):
        msg = {"role": "bashExecution", "command": {"length": length}, "output": ""}
        with pytest.raises(EstimateError) as info:
            estimate_tokens(msg)
        assert str(info.value) == "TypeError: Cannot convert object to primitive value"


def test_a_long_digit_string_is_read_in_linear_time():
    import time

    digits = "1" * 2_000_000 + "x"  # not a number: a backtracking reader takes minutes
    t0 = time.process_time()
    _check(estimate_tokens({"role": "branchSummary", "summary": {"length": digits}}), "nan")
    assert time.process_time() - t0 < 2.0
