"""Pi rules that used to be written more than once in Python, now with one home each:

* context-edit projection (Pi ``buildSessionProjection`` / ``projectContextEntry``):
  ``sessiontree.context.collect_context_edits`` / ``context_edit_for`` / ``apply_context_edit``,
  used by context building, compaction (cut points, summarized and kept messages) and branch
  summaries. The two former copies disagreed on non-string target ids and a missing
  ``replacement``; both cases are pinned here through every caller, and every corpus file is
  run through context building and compaction's per-entry messages.
* JavaScript truthiness and property access: ``sessiontree._jsjson.js_truthy`` / ``js_get``.
* ``new Date(header.timestamp)`` with the field missing (``undefined`` -> Invalid Date) versus
  an explicit ``null`` (``new Date(null)`` -> epoch 0), in the listing and the fleet's stats row.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessiontree import Session, SessionTreeError
from sessiontree._jsjson import JS_UNDEFINED, js_date_parse, js_get, js_truthy
from sessiontree.branch_summary import branch_entry_message
from sessiontree.compaction import collect_context_edits, entry_context_messages, prepare_compaction
from sessiontree.context import ContextError, build_context_entries, build_session_context
from sessiontree.listing import session_info
from sessiontree.settings import CompactionSettings

CORPUS = Path(__file__).parent.parent / "corpus"


def _msg(eid, parent, role, content, ts="2026-01-01T00:00:00.000Z"):
    message = {"role": role, "content": content, "timestamp": 1}
    if role == "assistant":
        message.update(provider="p", model="m", usage={"input": 1, "output": 1, "totalTokens": 2}, stopReason="stop")
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts, "message": message}


def _edit(eid, parent, target, **replacement):
    entry = {
        "type": "context_edit",
        "id": eid,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "targetId": target,
    }
    entry.update(replacement)
    return entry


def _path(target_entry_id, edit_target, **replacement):
    long = "x" * 4000
    return [
        _msg(target_entry_id, None, "user", "original " + long),
        _msg("a1", target_entry_id, "assistant", [{"type": "text", "text": "answer " + long}]),
        _edit("e1", "a1", edit_target, **replacement),
        _msg("u2", "e1", "user", "next " + long),
        _msg("a2", "u2", "assistant", [{"type": "text", "text": "reply " + long}]),
        _msg("u3", "a2", "user", "last " + long),
        _msg("a3", "u3", "assistant", [{"type": "text", "text": "done"}]),
    ]


def _summarized(prep):
    return prep.messages_to_summarize + prep.turn_prefix_messages


SETTINGS = CompactionSettings(keep_recent_tokens=1500)


# ==== context-edit projection =======================================================


@pytest.mark.parametrize("eid", [7, 7.0, -0.0, True, None])
def test_non_string_target_id_matches_as_a_js_map_key_in_every_caller(eid):
    path = _path(eid, eid, replacement={"content": "EDITED"})
    ctx = build_session_context(path)
    assert ctx.messages[0]["content"] == "EDITED"
    edits = collect_context_edits(path)
    assert entry_context_messages(path[0], edits)[0]["content"] == "EDITED"
    assert branch_entry_message(path[0], edits)["content"] == "EDITED"
    prep = prepare_compaction(path, SETTINGS)
    assert prep is not None and prep.first_kept_entry_id in ("u3", "a2", "u2")
    assert _summarized(prep)[0]["content"] == "EDITED"


@pytest.mark.parametrize("eid,target", [(1, True), (True, 1), ("7", 7), (7, "7"), (0, None), (None, JS_UNDEFINED)])
def test_non_string_target_id_of_another_js_type_never_matches(eid, target):
    replacement = {"replacement": {"content": "EDITED"}}
    path = _path(eid, target, **replacement)
    if target is JS_UNDEFINED:
        del path[2]["targetId"]
    assert build_session_context(path).messages[0]["content"].startswith("original ")
    edits = collect_context_edits(path)
    assert entry_context_messages(path[0], edits)[0]["content"].startswith("original ")
    assert _summarized(prepare_compaction(path, SETTINGS))[0]["content"].startswith("original ")


def test_a_nan_target_matches_a_nan_id_as_in_a_js_map():
    path = _path(math.nan, math.nan, replacement={"content": "EDITED"})
    assert build_session_context(path).messages[0]["content"] == "EDITED"
    assert entry_context_messages(path[0], collect_context_edits(path))[0]["content"] == "EDITED"


def test_missing_replacement_reads_content_of_undefined_in_every_caller():
    text = "TypeError: Cannot read properties of undefined (reading 'content')"
    path = _path("u1", "u1")  # a context_edit without a replacement key
    with pytest.raises(ContextError) as err:
        build_session_context(path)
    assert err.value.pi_error == text
    edits = collect_context_edits(path)
    with pytest.raises(ContextError) as err:
        entry_context_messages(path[0], edits)
    assert err.value.pi_error == text
    with pytest.raises(ContextError) as err:
        branch_entry_message(path[0], edits)
    assert err.value.pi_error == text
    with pytest.raises(ContextError) as err:
        prepare_compaction(path, SETTINGS)
    assert err.value.pi_error == text


def test_null_replacement_omits_and_content_less_replacement_drops_the_key_everywhere():
    hidden = _path("u1", "u1", replacement=None)
    assert build_session_context(hidden).messages[0]["content"][0]["text"].startswith("answer ")
    assert entry_context_messages(hidden[0], collect_context_edits(hidden)) == []
    bare = _path("u1", "u1", replacement={})
    assert "content" not in build_session_context(bare).messages[0]
    assert "content" not in entry_context_messages(bare[0], collect_context_edits(bare))[0]


def _corpus_paths():
    for f in sorted(CORPUS.rglob("*.jsonl")):
        try:
            yield f, [e.raw for e in Session.open(f).get_branch()]
        except SessionTreeError:  # not a session, or no path (a parentId cycle): nothing to compare
            continue


def _compare(path: list) -> tuple:
    """Context building's messages per source entry == compaction's per-entry messages."""
    ctx = build_session_context(path)
    edits = collect_context_edits(path)
    by_source: dict = {}
    for message, source in zip(ctx.messages, ctx.sources):
        by_source.setdefault(id(source), []).append(message)
    compared = edited = 0
    for entry in build_context_entries(path):
        if entry.get("type") == "compaction":
            continue
        assert entry_context_messages(entry, edits) == by_source.get(id(entry), []), entry.get("id")
        compared += 1
        edited += entry.get("id") in edits
    return compared, edited


def test_context_building_and_compaction_project_every_corpus_file_alike():
    compared = edited = 0
    for f, path in _corpus_paths():
        # the real path, then the same path without its compactions (every entry in context,
        # so edits before a kept boundary are exercised too)
        for view in (path, [e for e in path if not (isinstance(e, dict) and e.get("type") == "compaction")]):
            try:
                c, e = _compare(view)
            except ContextError:
                continue  # Pi throws on this file's content: both callers share that rule too
            except AssertionError as exc:
                raise AssertionError(f"{f.name}: {exc}") from None
            compared, edited = compared + c, edited + e
    assert compared > 1000 and edited >= 4


# ==== JavaScript truthiness and property access =======================================

JS_FALSY = [0, 0.0, -0.0, math.nan, "", None, JS_UNDEFINED, False]
JS_TRUTHY = [1, -1, 0.5, math.inf, -math.inf, "0", " ", "false", [], {}, [0], {"a": 0}, True]


@pytest.mark.parametrize("value", JS_FALSY)
def test_js_falsy_values(value):
    assert js_truthy(value) is False


@pytest.mark.parametrize("value", JS_TRUTHY)
def test_js_truthy_values(value):
    assert js_truthy(value) is True


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda c: st.lists(c, max_size=2) | st.dictionaries(st.text(max_size=2), c, max_size=2),
    max_leaves=4,
)


@given(_json)
def test_js_truthy_is_js_boolean_over_json_values(value):
    # ToBoolean: only the primitives false, +-0, NaN, "" and null are falsy; objects never are.
    if isinstance(value, (list, dict)):
        expected = True
    elif isinstance(value, float):
        expected = not (value == 0 or math.isnan(value))
    else:
        expected = bool(value)
    assert js_truthy(value) is expected


def test_js_get_reads_like_javascript():
    assert js_get({"a": None}, "a") is None and js_get({}, "a") is JS_UNDEFINED
    assert js_get("😀", "length") == 2 and js_get([1, 2], "length") == 2 and js_get(5, "length") is JS_UNDEFINED
    for obj, what in ((None, "null"), (JS_UNDEFINED, "undefined")):
        with pytest.raises(ContextError, match=rf"^TypeError: Cannot read properties of {what} \(reading 'k'\)$"):
            js_get(obj, "k", ContextError)


def test_no_module_keeps_its_own_truthiness_helper():
    pkg = Path(__file__).parent.parent.parent / "python" / "sessiontree"
    own = [
        p.name
        for p in pkg.rglob("*.py")
        if p.name != "_jsjson.py" and ("def _truthy(" in p.read_text() or "def _js_truthy(" in p.read_text())
    ]
    assert own == []


# ==== new Date(header.timestamp): missing is undefined, null is 0 ===========================


def _header_file(tmp_path: Path, name: str, header_extra: dict, drop_timestamp: bool) -> Path:
    header = {"type": "session", "version": 3, "id": name, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
    header.update(header_extra)
    if drop_timestamp:
        del header["timestamp"]
    entry = {"type": "custom", "customType": "x", "id": "c1", "parentId": None}  # no timestamp either
    p = tmp_path / f"{name}.jsonl"
    p.write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n")
    return p


def test_js_date_parse_missing_versus_null():
    assert math.isnan(js_date_parse(JS_UNDEFINED)) and math.isnan(js_date_parse())
    assert js_date_parse(None) == 0.0


def test_listing_created_is_none_for_a_header_without_timestamp(tmp_path):
    info = session_info(_header_file(tmp_path, "missing", {}, drop_timestamp=True))
    assert info is not None and info.created is None
    assert info.modified != datetime(1970, 1, 1, tzinfo=timezone.utc)


def test_listing_created_is_epoch_for_an_explicit_null_timestamp(tmp_path):
    info = session_info(_header_file(tmp_path, "null", {"timestamp": None}, drop_timestamp=False))
    assert info is not None and info.created == datetime(1970, 1, 1, tzinfo=timezone.utc)


def test_fleet_stats_created_missing_versus_null(tmp_path):
    pytest.importorskip("pyarrow")
    from sessiontree.fleet import session_stats

    missing = _header_file(tmp_path, "missing", {}, drop_timestamp=True)
    null = _header_file(tmp_path, "null", {"timestamp": None}, drop_timestamp=False)
    rows = {Path(r["path"]).name: r for r in session_stats(tmp_path, workers=1).to_pylist()}
    assert rows[missing.name]["error_kind"] is None and rows[missing.name]["created"] is None
    assert rows[null.name]["created"] == datetime(1970, 1, 1, tzinfo=timezone.utc)


# ==== entry accessors (issue 21): one missing-value rule, in _jsjson ====

ACCESSOR_NAMES = {"_id", "_etype", "_type", "_role", "entry_id", "entry_type", "message_role", "js_field"}


def test_entry_accessors_have_one_home():
    import ast

    import sessiontree

    pkg = Path(sessiontree.__file__).parent
    defined = sorted(
        f"{f.relative_to(pkg).as_posix()}:{n.name}"
        for f in pkg.rglob("*.py")
        for n in ast.walk(ast.parse(f.read_text()))
        if isinstance(n, ast.FunctionDef) and n.name in ACCESSOR_NAMES
    )
    assert defined == [f"_jsjson.py:{n}" for n in ("entry_id", "entry_type", "js_field", "message_role")]


def test_a_missing_field_is_undefined_and_null_stays_null():
    from sessiontree._jsjson import entry_id, entry_type, js_field, message_role

    assert entry_id({}) is JS_UNDEFINED and entry_type({}) is JS_UNDEFINED
    assert entry_id({"id": None}) is None and entry_type({"type": None}) is None
    assert entry_id("not an object") is JS_UNDEFINED and js_field(None, "id") is JS_UNDEFINED
    assert entry_id({"id": "a"}) == "a" and entry_type({"type": "message"}) == "message"
    # a role that is not a string equals no role name (and never reaches a set lookup unhashable)
    assert message_role({"role": ["assistant"]}) is JS_UNDEFINED and message_role({}) is JS_UNDEFINED
    assert message_role({"role": None}) is JS_UNDEFINED and message_role({"role": "user"}) == "user"


def test_branch_summary_common_ancestor_keeps_undefined_apart_from_null():
    from sessiontree.branch_summary import collect_entries_for_branch_summary

    # the old path holds an entry whose id is null, the target path one whose id is missing:
    # Pi's Set has null, not undefined, so they share no ancestor (undefined !== null)
    old = [{"type": "message", "id": None}, {"type": "message", "id": "o", "parentId": None}]
    target = [{"type": "message"}, {"type": "message", "id": "t"}]
    by_id = {"o": old[1], "t": target[1]}
    got = collect_entries_for_branch_summary(by_id.get, lambda eid: old if eid == "o" else target, "o", "t")
    assert got.common_ancestor_id is None
    assert [e["id"] for e in got.entries] == ["o"]
